#!/usr/bin/env bash
# The CPU encoder's matrix-product paths on an Intel CPU (issue 17), each with
# sentence-transformers in the same `warpfold bench --peer` run, taking turns ROUNDS times (default
# 3). VARIANTS (default "mkl panels gemm bf16"; names are the logs'):
#   mkl     --cpu-precision f32 where MKL is installed (`warpfold models fetch`): MKL sgemm (the
#           default before bf16x3, and still where the CPU has no AMX);
#   auto    the default: bf16x3 on a CPU with AMX where MKL is installed, else f32;
#   panels  MKL turned off (WARPFOLD_MKL=off): the weights in AVX-512 panels (cpu_panels.rs);
#   gemm    MKL off and the panels off: the gemm crate's AVX-512 kernels (the default before the panels);
#   bf16    --cpu-precision bf16 (MKL's bf16 products, AMX where the CPU has it), against the peer in
#           f32 and cast to bfloat16 (--peer-precision f32,bf16), both in the same rounds;
#   bf16x3  --cpu-precision bf16x3 (the weights' products as three bf16 products of split
#           f32s, about 16 bits of each; and attention's too, on AMX's tiles where they
#           run), against the peer in f32;
#   tiled   the default with attention in f32 AVX-512 tiles (WARPFOLD_CPU_ATTENTION=tiled): on a
#           CPU with AMX, the default's attention before the AMX attention.
# PAIRS rounds of the variants in alternation (default 2), as a VM's speed drifts. The CPU is
# recorded in OUTPUT_DIR/cpu.txt.
#   bash bench/peer/setup.sh && bash bench/cpu/run-intel-ab.sh bench/results/DATE-MACHINE-WHAT
set -euo pipefail
cd "$(dirname "$0")/../.."
O=${1:?usage: run-intel-ab.sh OUTPUT_DIR}
mkdir -p "$O"
lscpu > "$O/cpu.txt"
run() {
  local name=$1
  shift
  ./target/release/warpfold bench --peer --rounds "${ROUNDS:-3}" --documents 64 --packer-sequences 100000 \
    --out "$O/$name.json" "$@" > "$O/$name.log" 2>&1
}
for pair in $(seq 1 "${PAIRS:-2}"); do
  for v in ${VARIANTS:-mkl panels gemm bf16}; do
    case $v in
      mkl) WARPFOLD_CPU_PRECISION=f32 run "mkl-$pair" ;;
      auto) run "auto-$pair" ;;
      panels) WARPFOLD_MKL=off run "panels-$pair" ;;
      gemm) WARPFOLD_MKL=off WARPFOLD_CPU_PANELS=off run "gemm-$pair" ;;
      bf16) WARPFOLD_CPU_PRECISION=bf16 run "bf16-$pair" --peer-precision f32,bf16 ;;
      bf16x3) WARPFOLD_CPU_PRECISION=bf16x3 run "bf16x3-$pair" ;;
      tiled) WARPFOLD_CPU_ATTENTION=tiled run "tiled-$pair" ;;
    esac
  done
done
