#!/usr/bin/env bash
# How close MKL's bf16 product runs to AMX's own rate on the encoder's shapes.
#   bash bench/cpu/amx-probe/run.sh > bench/results/cpu-DATE/amx-probe.txt
set -euo pipefail
cd "$(dirname "$0")/../../.."
tmp=$(mktemp -d)
gcc -O2 -mamx-tile -mamx-bf16 bench/cpu/amx-probe/tile-rate.c -o "$tmp/tile-rate"
gcc -O2 -mamx-tile -mamx-bf16 bench/cpu/amx-probe/gemm.c -o "$tmp/gemm" -lm
lscpu | grep -E "Model name|Vendor"
echo "== tdpbf16ps, one core, random bf16 data"; "$tmp/tile-rate"
echo "== MKL (sequential)"; MKL_THREADING_LAYER=sequential bench/.venv-peer/bin/python bench/cpu/amx-probe/mkl_rate.py
echo "== oneDNN through torch"; bench/.venv-peer/bin/python bench/cpu/amx-probe/onednn_rate.py
echo "== a plain AMX GEMM"; for kc in 384 100000; do "$tmp/gemm" "$kc"; done
rm -rf "$tmp"
