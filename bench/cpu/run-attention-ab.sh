#!/usr/bin/env bash
# The CPU encoder's tiled attention and weight panels against the kernels before them (issue 17), each with
# sentence-transformers in the same `warpfold bench --peer` run, taking turns ROUNDS times. VARIANTS
# (default "tiled before"; names are the logs'):
#   tiled   the defaults: attention by the tiled AVX2 kernel (crates/candle/src/cpu_attention.rs),
#           and on an AVX2-only CPU the weights in panels (cpu_panels.rs);
#   before  attention as two products with a softmax between (WARPFOLD_CPU_ATTENTION=products) and
#           the gemm crate for the weights (WARPFOLD_CPU_PANELS=off): the kernels before 2026-12-03;
#   products  only the attention of before (the panels as by default);
#   gemm    only the weights of before (WARPFOLD_CPU_PANELS=off; the tiled attention as by default).
# PAIRS rounds of the variants in alternation (default 2), as the VM's speed drifts. The CPU is
# recorded in OUTPUT_DIR/cpu.txt.
#   bash bench/peer/setup.sh && bash bench/cpu/run-attention-ab.sh bench/results/DATE-MACHINE-WHAT
set -euo pipefail
cd "$(dirname "$0")/../.."
O=${1:?usage: run-attention-ab.sh OUTPUT_DIR}
mkdir -p "$O"
lscpu > "$O/cpu.txt"
run() { ./target/release/warpfold bench --peer --rounds "${ROUNDS:-3}" --documents 64 --packer-sequences 100000 --out "$O/$1.json" > "$O/$1.log" 2>&1; }
for pair in $(seq 1 "${PAIRS:-2}"); do
  for v in ${VARIANTS:-tiled before}; do
    case $v in
      tiled) run "tiled-$pair" ;;
      before) WARPFOLD_CPU_ATTENTION=products WARPFOLD_CPU_PANELS=off run "before-$pair" ;;
      products) WARPFOLD_CPU_ATTENTION=products run "products-$pair" ;;
      gemm) WARPFOLD_CPU_PANELS=off run "gemm-$pair" ;;
    esac
  done
done
