#!/usr/bin/env bash
# What bench/gpu/run-answers.sh needs on the GPU machine, packed into one stream of parts
# (bench/gpu/stream.sh): the CUDA binary (scripts/gpu/build-cuda.sh), MiniLM in f16, the QA set's documents and
# pages (crates/cli/examples/qa_documents.rs), the facts set's texts as read here (the scans through
# Tesseract, which the GPU machine lacks), the transformers peer's `gguf` wheel and the default chat
# model's GGUF, last (the largest). The summaries' `facts` example (`--example facts`, compressed to
# .gpu/facts.xz) travels by itself with the call that runs it.
set -euo pipefail
cd "$(dirname "$0")/../.."
G=${GPU_DIR:-.gpu}
Q=models/Qwen2.5-Coder-1.5B-Instruct/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
for f in $G/warpfold.xz $G/run-on-gpu-machine.sh models/all-MiniLM-L6-v2/model.safetensors $Q; do
  [ -f "$f" ] || { echo "pack-answers: $f is missing (scripts/gpu/build-cuda.sh; warpfold models fetch)" >&2; exit 1; }
done
# the binaries each time; what does not change with the code (models, documents) once (FRESH=1: again)
dir=.gpu-extra/answers
[ -z "${FRESH:-}" ] || rm -rf "$dir"
mkdir -p "$dir"
cp $G/warpfold.xz $G/run-on-gpu-machine.sh "$dir/"
if [ ! -f "$dir/minilm-f16.tar.xz" ]; then
  stage=$(mktemp -d) && cp -r models/all-MiniLM-L6-v2 "$stage/" && rm "$stage/all-MiniLM-L6-v2/model.safetensors"
  python3 bench/gpu/to_f16.py models/all-MiniLM-L6-v2/model.safetensors "$stage/all-MiniLM-L6-v2/model.safetensors"
  tar -C "$stage" -cf - all-MiniLM-L6-v2 | xz -T2 -6 > "$dir/minilm-f16.tar.xz" && rm -rf "$stage"
fi
if [ ! -f "$dir/qa.tar.xz" ]; then
  qa=$(mktemp -d)
  cargo run --release --locked -q -p warpfold --example qa_documents -- "$qa/qa"
  tar -C "$qa" -cf - qa | xz -T2 -6 > "$dir/qa.tar.xz" && rm -rf "$qa"
fi
[ -f "$dir/fact-texts.jsonl" ] || cargo run --release --locked -q -p warpfold-summarize --example facts -- "$Q" --write-texts "$dir/fact-texts.jsonl"
[ -f "$dir/gguf-0.19.0-py3-none-any.whl" ] || bash bench/gpu/fetch-peer-wheels.sh "$dir"
[ -f "$dir/$(basename $Q)" ] || ln -f "$Q" "$dir/$(basename $Q)" 2>/dev/null || cp "$Q" "$dir/"
du -sh "$dir"/*
bash bench/gpu/stream.sh pack "$dir" run-on-gpu-machine.sh minilm-f16.tar.xz qa.tar.xz fact-texts.jsonl gguf-0.19.0-py3-none-any.whl \
  warpfold.xz "$(basename $Q)"
ls -la .gpu-extra/stream
