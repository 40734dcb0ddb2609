#!/usr/bin/env bash
# What bench/gpu/run-languages.sh needs on the GPU machine, packed into one stream of parts
# (bench/gpu/stream.sh): the known-item sets of bench/retrieval/build.py (corpus and queries; the
# relevance judgements stay here, where the runs are scored), multilingual-e5-small's file and the
# CUDA binary (scripts/gpu/build-cuda.sh).
#   SETS="manpages manpages-de ..." to choose the sets (default: every built one under /tmp/retrieval)
#   MINILM=1 to pack all-MiniLM-L6-v2 in f16 too (bench/gpu/run-indexes.sh indexes with both models)
set -euo pipefail
cd "$(dirname "$0")/../.."
R=${RETRIEVAL_DIR:-/tmp/retrieval}
E5=models/multilingual-e5-small/e5-small-q4.bin
for f in .gpu/warpfold.xz .gpu/run-on-gpu-machine.sh $E5; do
  [ -f "$f" ] || { echo "pack-languages: $f is missing (scripts/gpu/build-cuda.sh; warpfold models fetch multilingual-e5-small)" >&2; exit 1; }
done
sets=${SETS:-$(cd "$R" && for d in manpages manpages-* debian-handbook; do [ -f "$d/qrels.tsv" ] && echo "$d"; done | grep -v -- -part)}
dir=.gpu-extra/languages
rm -rf "$dir" && mkdir -p "$dir"
stage=$(mktemp -d)
for s in $sets; do mkdir -p "$stage/$s" && cp "$R/$s/corpus.jsonl" "$R/$s/queries.jsonl" "$stage/$s/"; done
tar -C "$stage" -cf - $sets | xz -T2 -6 > "$dir/sets.tar.xz" && rm -rf "$stage"
cp .gpu/warpfold.xz .gpu/run-on-gpu-machine.sh "$dir/"
ln -f "$E5" "$dir/e5-small-q4.bin" 2>/dev/null || cp "$E5" "$dir/"
minilm=()
if [ "${MINILM:-0}" = 1 ]; then
  stage=$(mktemp -d) && cp -r models/all-MiniLM-L6-v2 "$stage/" && rm "$stage/all-MiniLM-L6-v2/model.safetensors"
  python3 bench/gpu/to_f16.py models/all-MiniLM-L6-v2/model.safetensors "$stage/all-MiniLM-L6-v2/model.safetensors"
  tar -C "$stage" -cf - all-MiniLM-L6-v2 | xz -T2 -6 > "$dir/minilm-f16.tar.xz" && rm -rf "$stage"
  minilm=(minilm-f16.tar.xz)
fi
du -sh "$dir"/*
bash bench/gpu/stream.sh pack "$dir" run-on-gpu-machine.sh sets.tar.xz "${minilm[@]}" warpfold.xz e5-small-q4.bin
