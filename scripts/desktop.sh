#!/usr/bin/env bash
# Builds and starts the warpfold desktop app (Tauri 2): drop PDFs on its window or watch folders,
# watch the queue, the bins and the throughput, search. Run scripts/setup.sh once before.
# On a machine with an NVIDIA GPU and a CUDA toolkit it is the GPU build (FlashAttention-2 varlen on
# compute capability 8.0+, the masked-attention path below), built in target/gpu; otherwise the CPU
# build (scripts/gpu/plan.sh says which and why). Settings, all optional:
#   WARPFOLD_DATA_DIR      where the index and settings live (default ~/.local/share/warpfold, as serve)
#   WARPFOLD_DEVICE        auto (default) | cpu | cuda | cuda:N | cuda:0,cuda:1 | cuda:all
#   WARPFOLD_VRAM_BUDGET   plan GPU memory as if the card had this much (e.g. 8GiB)
#   WARPFOLD_BIN_TOKENS    a fixed bin capacity instead of the VRAM probe's
#   WARPFOLD_SUMMARIZE=0   no summaries
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build-ui.sh
eval "$(bash scripts/gpu/plan.sh)"
if [ -n "$WARPFOLD_FEATURES" ]; then
  export CUDA_COMPUTE_CAP
  # FlashAttention-2's compiled kernels are kept here (plan.sh names one folder per card and list).
  [ -n "${CANDLE_FLASH_ATTN_BUILD_DIR:-}" ] && mkdir -p "$CANDLE_FLASH_ATTN_BUILD_DIR"
  CARGO_TARGET_DIR=target/gpu cargo build --release --locked -p warpfold-desktop --features "$WARPFOLD_FEATURES"
  app=./target/gpu/release/warpfold-desktop
else
  cargo build --release --locked -p warpfold-desktop
  app=./target/release/warpfold-desktop
fi
WARPFOLD_MODELS_DIR="${WARPFOLD_MODELS_DIR:-$PWD/models}" exec "$app" "$@"
