#!/usr/bin/env bash
# What bench/gpu/run-rerank.sh needs on the GPU machine, packed into one stream of parts
# (bench/gpu/stream.sh): the English known-item sets of bench/retrieval/build.py (corpus and queries;
# the relevance judgements stay here, where the runs are scored), all-MiniLM-L6-v2 and
# all-mpnet-base-v2 in f16, the CUDA binary (scripts/gpu/build-cuda.sh) and the default chat model's
# GGUF, which reranks, last (the largest).
#   SETS="manpages debian-handbook" (the default) to choose the sets
set -euo pipefail
cd "$(dirname "$0")/../.."
R=${RETRIEVAL_DIR:-/tmp/retrieval}
Q=models/Qwen2.5-Coder-1.5B-Instruct/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
for f in .gpu/warpfold.xz .gpu/run-on-gpu-machine.sh models/all-MiniLM-L6-v2/model.safetensors models/all-mpnet-base-v2/model.safetensors $Q; do
  [ -f "$f" ] || { echo "pack-rerank: $f is missing (scripts/gpu/build-cuda.sh; warpfold models fetch)" >&2; exit 1; }
done
sets=${SETS:-manpages debian-handbook}
dir=.gpu-extra/rerank
rm -rf "$dir" && mkdir -p "$dir"
stage=$(mktemp -d)
for s in $sets; do mkdir -p "$stage/sets/$s" && cp "$R/$s/corpus.jsonl" "$R/$s/queries.jsonl" "$stage/sets/$s/"; done
for m in all-MiniLM-L6-v2 all-mpnet-base-v2; do
  cp -r models/$m "$stage/" && rm "$stage/$m/model.safetensors"
  python3 bench/gpu/to_f16.py models/$m/model.safetensors "$stage/$m/model.safetensors"
done
tar -C "$stage" -cf - sets all-MiniLM-L6-v2 all-mpnet-base-v2 | xz -T2 -6 > "$dir/inputs.tar.xz" && rm -rf "$stage"
cp .gpu/warpfold.xz .gpu/run-on-gpu-machine.sh "$dir/"
ln -f "$Q" "$dir/$(basename $Q)" 2>/dev/null || cp "$Q" "$dir/"
du -sh "$dir"/*
PART_BYTES=${PART_BYTES:-50000000} bash bench/gpu/stream.sh pack "$dir" run-on-gpu-machine.sh inputs.tar.xz warpfold.xz "$(basename $Q)"
