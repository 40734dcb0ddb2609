#!/usr/bin/env bash
# What the summary run on the GPU machine needs (bench/gpu/run-summarize-reports.sh), packed
# into one stream of parts (bench/gpu/stream.sh) to carry over consecutive calls: the CUDA binary
# (scripts/gpu/build-cuda.sh), the two default chat models' pinned GGUFs (`warpfold models fetch`),
# the documents (examples/summary_settings --write: the three of tests/summary_quality.rs, and 48
# reports of bench/gpu/summary-bench-words.txt), the peer's one extra wheel (gguf), and
# all-MiniLM-L6-v2 in f16 for the app-core rerun (bench/gpu/run-app-indexing.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=.gpu-extra/app-summaries
rm -rf "$dir" && mkdir -p "$dir"
cp .gpu/warpfold.xz .gpu/run-on-gpu-machine.sh "$dir/"
cp models/Qwen2.5-Coder-1.5B-Instruct/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf "$dir/"
ex=target/release/examples/summary_settings
cargo build --release --locked -p warpfold-summarize --example summary_settings
$ex --seeds 7,101,9 --words 250,450,950 --write "$dir/kd"
$ex --words "$(cat bench/gpu/summary-bench-words.txt)" --write "$dir/kb"
bash bench/gpu/fetch-peer-wheels.sh "$dir"
stage=$(mktemp -d) && cp -r models/all-MiniLM-L6-v2 "$stage/" && rm "$stage/all-MiniLM-L6-v2/model.safetensors"
python3 bench/gpu/to_f16.py models/all-MiniLM-L6-v2/model.safetensors "$stage/all-MiniLM-L6-v2/model.safetensors"
tar -C "$stage" -cf - all-MiniLM-L6-v2 | xz -T2 -6 > "$dir/minilm-f16.tar.xz" && rm -rf "$stage"
ls -la "$dir" && ls "$dir/kb" | wc -l
bash bench/gpu/stream.sh pack "$dir"
