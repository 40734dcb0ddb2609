#!/usr/bin/env bash
# The CPU encoder's two attention kernels side by side (issue 17, session 17), each with
# sentence-transformers in the same `warpfold bench --peer` run, taking turns ROUNDS times: the tiled
# AVX2 kernel (crates/candle/src/cpu_attention.rs, the default where the CPU has AVX2 + FMA) and
# attention as two matrix products with a softmax between (WARPFOLD_CPU_ATTENTION=products, the
# kernel of before). PAIRS times in alternation (default 2), as the VM's speed drifts. The CPU is
# recorded in OUTPUT_DIR/cpu.txt.
#   bash bench/peer/setup.sh && bash bench/cpu/run-attention-ab.sh bench/results/cpu-DATE
set -euo pipefail
cd "$(dirname "$0")/../.."
O=${1:?usage: run-attention-ab.sh OUTPUT_DIR}
mkdir -p "$O"
lscpu > "$O/cpu.txt"
run() { ./target/release/warpfold bench --peer --rounds "${ROUNDS:-3}" --documents 64 --packer-sequences 100000 --out "$O/$1.json" > "$O/$1.log" 2>&1; }
for pair in $(seq 1 "${PAIRS:-2}"); do
  run "tiled-$pair"
  WARPFOLD_CPU_ATTENTION=products run "products-$pair"
done
