#!/usr/bin/env bash
# Refreshes the documentation's pictures in docs/screenshots/ (the web UI in Chromium against the real
# `warpfold serve`, and the desktop window under Xvfb). The tests take the same pictures into target/
# and tests/e2e/artifacts/ and never touch docs/: this is the one command that does.
#   bash scripts/screenshots.sh       # after scripts/test.sh (or setup.sh) built the binaries
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x target/release/warpfold ] || { echo "screenshots: build first (bash scripts/setup.sh)" >&2; exit 1; }
E2E_SCREENSHOTS=1 bash tests/e2e/run.sh
if [ -x target/release/warpfold-desktop ]; then
  bash tests/desktop/screenshot.sh docs/screenshots/desktop.png
else
  echo "screenshots: no desktop binary (cargo build --release --locked -p warpfold-desktop): desktop.png kept" >&2
fi
git status --short docs/screenshots
