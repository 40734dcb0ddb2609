#!/usr/bin/env bash
# The main job from a fresh Debian machine with Rust: install system packages, build warpfold, fetch
# and verify the default model, embed the bundled sample texts, and print the reports (the embedding
# run's own, then a short packed-against-padded benchmark on the stress corpus).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cargo build --release --locked
wf=./target/release/warpfold
$wf models fetch
mkdir -p target/out
$wf embed < tests/data/samples.jsonl > target/out/samples.embeddings.jsonl
echo "embeddings of $(wc -l < tests/data/samples.jsonl) sample texts: target/out/samples.embeddings.jsonl"
$wf bench --corpus stress --documents 16 --packer-sequences 1000000 --out target/out/bench-quick.json
