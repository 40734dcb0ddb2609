#!/usr/bin/env bash
# What bench/gpu/run-facts.sh needs on the GPU machine, as one stream of parts (bench/gpu/stream.sh):
# the `facts` example built with CUDA, the facts set's texts as read here (the scans through
# Tesseract, which the GPU machine lacks), and the default chat model's GGUF, last.
set -euo pipefail
cd "$(dirname "$0")/../.."
Q=models/Qwen2.5-Coder-1.5B-Instruct/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
dir=.gpu-extra/facts
mkdir -p "$dir"
. /opt/warpfold-cuda/env.sh
CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-90} CARGO_TARGET_DIR=target/cuda cargo build --profile release-gpu --locked -p warpfold-summarize \
  --features flash-attn --example facts
xz -T2 -6 -c target/cuda/release-gpu/examples/facts > "$dir/facts.xz"
cargo run --release --locked -q -p warpfold-summarize --example facts -- "$Q" --write-texts "$dir/fact-texts.jsonl"
ln -f "$Q" "$dir/$(basename $Q)" 2>/dev/null || cp "$Q" "$dir/"
du -sh "$dir"/*
PART_BYTES=${PART_BYTES:-50000000} bash bench/gpu/stream.sh pack "$dir" fact-texts.jsonl facts.xz "$(basename $Q)"
