#!/usr/bin/env bash
# Builds the web UI (ui/ -> ui/dist), which `warpfold serve` embeds and the desktop app loads.
# Must run before `cargo build` for the binaries to carry the UI.
set -euo pipefail
cd "$(dirname "$0")/../ui"
[ -d node_modules ] && [ node_modules/.package-lock.json -nt package-lock.json ] || npm ci --no-audit --no-fund --loglevel=error
npm run --silent build
