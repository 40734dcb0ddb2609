#!/usr/bin/env bash
# The CPU encoder side by side with sentence-transformers (issue 17), each warpfold variant with the
# peer in the same process run, taking turns ROUNDS times (default 3; the ratio of the median runs,
# and each round's own, are reported: a shared VM's speed drifts during a run): the fused CPU layers
# with MKL, the same with the gemm crate (WARPFOLD_MKL=off), and once the candle-op layers of before
# (WARPFOLD_CPU_ENCODER=ops; OPS=0 leaves it out).
# MKL is the default on an Intel CPU once `warpfold models fetch` has installed it; on another CPU
# it is used only when named (WARPFOLD_MKL=its folder), which this script does for the comparison
# (`warpfold models fetch mkl` installs it anywhere). The CPU is recorded in OUTPUT_DIR/cpu.txt.
#   bash bench/peer/setup.sh && bash bench/cpu/run-ab.sh bench/results/DATE-MACHINE-WHAT
set -euo pipefail
cd "$(dirname "$0")/../.."
O=${1:?usage: run-ab.sh OUTPUT_DIR}
mkdir -p "$O"
W=./target/release/warpfold
lscpu > "$O/cpu.txt"
R=${ROUNDS:-3}
run() { "$W" bench --peer --rounds "${2:-$R}" --documents 64 --packer-sequences 100000 --out "$O/$1.json" > "$O/$1.log" 2>&1; }
mkl_run() {
  if grep -qm1 GenuineIntel /proc/cpuinfo; then run "$1"; else (export WARPFOLD_MKL="$PWD/models/mkl"; run "$1"); fi
}
mkl_run mkl
WARPFOLD_MKL=off run gemm-crate
[ "${OPS:-1}" = 0 ] || WARPFOLD_CPU_ENCODER=ops run candle-ops 1
