#!/usr/bin/env bash
# Builds warpfold with CUDA and FlashAttention-2 on a machine without a GPU, and packs the binary into
# .gpu/ (git-ignored) with the script that runs it on the GPU machine.
#
# Uses the GPU build kit in ../shared/gpu (a CUDA 13.0 toolchain from PyPI, CUTLASS headers, prebuilt
# sm_90a flash-attn objects): see its README. A clean build takes ~12 min on 2 cores; later builds
# only recompile warpfold's own crates. Set CUDA_COMPUTE_CAP for another card (86, 89: see the kit's
# README for compiling only the kernels a model needs).
#
#   bash scripts/gpu/build-cuda.sh            # -> .gpu/warpfold.xz, .gpu/run-on-gpu-machine.sh
#   WARPFOLD_GPU_DESKTOP=1 bash scripts/gpu/build-cuda.sh   # the desktop app with flash-attn too
#                                             # (target/cuda/release-gpu/warpfold-desktop)
set -euo pipefail
cd "$(dirname "$0")/../.."
KIT=${WARPFOLD_GPU_KIT:-../shared/gpu}
if [ ! -f "$KIT/setup-cuda-toolchain.sh" ]; then
  echo "build-cuda: the GPU build kit is not at $KIT (set WARPFOLD_GPU_KIT)" >&2
  exit 1
fi
bash "$KIT/setup-cuda-toolchain.sh"
# shellcheck disable=SC1091
source "${WARPFOLD_CUDA_PREFIX:-/opt/warpfold-cuda}/env.sh"
export CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-90}
: > "$WARPFOLD_CUDA_PREFIX/nvcc-wrap.log"
# A target folder of its own: the CPU build in target/release stays as it is.
CARGO_TARGET_DIR=target/cuda cargo build --profile release-gpu --locked -p warpfold --features flash-attn --bin warpfold
echo "flash-attn objects: $(awk '{print $2}' "$WARPFOLD_CUDA_PREFIX/nvcc-wrap.log" | sort | uniq -c | tr '\n' ' ')"
mkdir -p .gpu
xz -T2 -9 -c target/cuda/release-gpu/warpfold > .gpu/warpfold.xz
cp "$KIT/run-on-gpu-machine.sh" .gpu/
ls -la .gpu/
if [ "${WARPFOLD_GPU_DESKTOP:-0}" = 1 ]; then
  CARGO_TARGET_DIR=target/cuda cargo build --profile release-gpu --locked --features flash-attn -p warpfold-desktop
  ls -la target/cuda/release-gpu/warpfold-desktop
fi
