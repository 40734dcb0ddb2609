#!/usr/bin/env bash
# The GPU build a user with a gaming card gets from scripts/desktop.sh, checked on the build machine
# (no GPU): an RTX 4070 stand-in for nvidia-smi (compute capability 8.9), the build kit's nvcc
# (../shared/gpu: CUDA 13.0 from PyPI, CUTLASS seeded), scripts/gpu/plan.sh's choices (flash-attn,
# the default models' five FlashAttention-2 kernels, the other 47 stubbed by nvcc-fa-kernels). The
# five real sm_89 kernels come from bench/gpu/compile-fa-consumer.sh's run on the GPU machine
# (FA_PREBUILT_DIR, so 2 cores need not spend ~30 min on them); everything else compiles here.
#   bash bench/gpu/build-consumer-check.sh DIR_WITH_SM89_OBJECTS
set -euo pipefail
cd "$(dirname "$0")/../.."
objects=$1
smi=$(mktemp)
printf '#!/bin/sh\necho "NVIDIA GeForce RTX 4070, 8.9, 12282 MiB"\n' > "$smi" && chmod +x "$smi"
source /opt/warpfold-cuda/env.sh
export FA_PREBUILT_DIR=$objects NVIDIA_SMI=$smi
eval "$(bash scripts/gpu/plan.sh)"
export CUDA_COMPUTE_CAP
mkdir -p "$CANDLE_FLASH_ATTN_BUILD_DIR"
: > "$WARPFOLD_CUDA_PREFIX/nvcc-wrap.log"
time CARGO_TARGET_DIR=target/gpu cargo build --release --locked -p warpfold-desktop --features "$WARPFOLD_FEATURES"
echo "kit wrapper: $(awk '{print $2}' "$WARPFOLD_CUDA_PREFIX/nvcc-wrap.log" | sort | uniq -c | tr '\n' ' ')"
ls -la target/gpu/release/warpfold-desktop
strings target/gpu/release/warpfold-desktop | grep -c "is not compiled into this build" || true
