#!/usr/bin/env bash
# The browser test of the web UI against `warpfold serve` (Debian's chromium through playwright-core).
# Build order: ui/ first (`cd ui && npm ci && npm run build`), then the binary, which embeds ui/dist.
#   WARPFOLD=path/to/warpfold bash tests/e2e/run.sh      # default target/release/warpfold
set -euo pipefail
cd "$(dirname "$0")"
[ -x "${CHROMIUM:-/usr/bin/chromium}" ] || { echo "no chromium: apt-get install -y chromium" >&2; exit 2; }
[ -d node_modules/playwright-core ] && [ -d node_modules/axe-core ] || npm ci --no-audit --no-fund --loglevel=error
exec node --test ui.test.mjs
