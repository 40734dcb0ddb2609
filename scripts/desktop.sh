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
#   WARPFOLD_SUMMARIZE=0   summaries only when asked (the chat model still answers questions)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
build_app warpfold-desktop warpfold-desktop -p warpfold-desktop
WARPFOLD_MODELS_DIR="${WARPFOLD_MODELS_DIR:-$PWD/models}" exec "$app" "$@"
