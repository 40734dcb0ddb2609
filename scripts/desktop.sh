#!/usr/bin/env bash
# Builds and starts the warpfold desktop app (Tauri 2): drop PDFs on its window or watch folders,
# watch the queue, the bins and the throughput, search. Run scripts/setup.sh once before.
# WARPFOLD_DATA_DIR picks where its index and settings live (default: the app's data folder,
# ~/.local/share/dev.warpfold.desktop); WARPFOLD_DEVICE=cpu|cuda|auto.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build-ui.sh
cargo build --release --locked -p warpfold-desktop
WARPFOLD_MODELS_DIR="${WARPFOLD_MODELS_DIR:-$PWD/models}" exec ./target/release/warpfold-desktop "$@"
