#!/usr/bin/env bash
# The CPU encoder side by side with sentence-transformers (issue 17), each warpfold variant with the
# peer in the same process run, twice in a row: the fused CPU layers with MKL (the default on an Intel
# CPU once `warpfold models fetch` has installed it), the same with the gemm crate (WARPFOLD_MKL=off),
# and once the candle-op layers of before (WARPFOLD_CPU_ENCODER=ops).
#   bash bench/peer/setup.sh && bash bench/cpu/run-ab.sh bench/results/cpu-DATE
set -euo pipefail
cd "$(dirname "$0")/../.."
O=${1:?usage: run-ab.sh OUTPUT_DIR}
mkdir -p "$O"
W=./target/release/warpfold
run() { "$W" bench --peer --documents 64 --packer-sequences 100000 --out "$O/$1.json" > "$O/$1.log" 2>&1; }
for rep in 1 2; do
  run mkl-rep$rep
  WARPFOLD_MKL=off run gemm-crate-rep$rep
done
WARPFOLD_CPU_ENCODER=ops run candle-ops-rep1
