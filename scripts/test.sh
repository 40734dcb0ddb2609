#!/usr/bin/env bash
# Every test: unit tests next to the code (packer properties, scheduler, kernels, models) and the
# integration binary (real model, real `warpfold` binary). One profile (release) is built once: the
# model tests are numeric and ~30x slower unoptimised.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cargo build --release --locked
./target/release/warpfold models fetch
cargo test --release --locked --workspace
