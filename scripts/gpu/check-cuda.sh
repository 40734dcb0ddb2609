#!/usr/bin/env bash
# Compiles (does not run) the CUDA and FlashAttention-2 code paths, so a change that breaks the GPU
# build fails here, on a machine without a GPU, instead of on the GPU machine. `cargo check` of the
# `warpfold` CLI and the desktop app with `--features flash-attn` (which includes `cuda`), every
# target of the crates that hold GPU code (their gated GPU tests included).
#
# Uses the GPU build kit (a CUDA 13.0 toolchain from PyPI, about 12 s to set up; see
# scripts/gpu/build-cuda.sh). Where the kit is not on this machine the check says so and is skipped:
# it cannot be installed from the package registries alone.
#
#   bash scripts/gpu/check-cuda.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
KIT=${WARPFOLD_GPU_KIT:-../shared/gpu}
if [ ! -f "$KIT/setup-cuda-toolchain.sh" ] && [ -f /work/shared/gpu/setup-cuda-toolchain.sh ]; then
  KIT=/work/shared/gpu
fi
if [ ! -f "$KIT/setup-cuda-toolchain.sh" ]; then
  echo "check-cuda: skipped: no GPU build kit at $KIT (set WARPFOLD_GPU_KIT to check the CUDA build)" >&2
  exit 0
fi
bash "$KIT/setup-cuda-toolchain.sh" > /dev/null
# shellcheck disable=SC1091
source "${WARPFOLD_CUDA_PREFIX:-/opt/warpfold-cuda}/env.sh"
export CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-90}
started=$(date +%s)
# Its own target folder: the CPU build's target/release is not touched.
CARGO_TARGET_DIR=target/cuda cargo check --profile release-gpu --locked -p warpfold --features flash-attn --bin warpfold
CARGO_TARGET_DIR=target/cuda cargo check --profile release-gpu --locked -p warpfold-candle --features flash-attn --all-targets
echo "check-cuda: the CUDA and flash-attn code compiles ($(($(date +%s) - started)) s)"
