#!/usr/bin/env bash
# What bench/gpu/run-languages.sh needs on the GPU machine, packed into one stream of parts
# (bench/gpu/stream.sh): the known-item sets of bench/retrieval/build.py (corpus and queries; the
# relevance judgements stay here, where the runs are scored), multilingual-e5-small's file and the
# CUDA binary (scripts/gpu/build-cuda.sh).
#   SETS="manpages manpages-de ..." to choose the sets (default: every built one under /tmp/retrieval)
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
du -sh "$dir"/*
bash bench/gpu/stream.sh pack "$dir" run-on-gpu-machine.sh sets.tar.xz warpfold.xz e5-small-q4.bin
