#!/usr/bin/env bash
# Session 11: what bench/gpu/run-s11.sh needs on the GPU machine, packed into one stream of parts
# (bench/gpu/stream.sh): run-on-gpu-machine.sh, the CUDA binary (scripts/gpu/build-cuda.sh) and the
# default CPU chat model SmolLM2-135M-Instruct (GGUF; `warpfold models fetch`). Build first.
set -euo pipefail
cd "$(dirname "$0")/../.."
G=${GPU_DIR:-.gpu}
for f in $G/warpfold.xz $G/run-on-gpu-machine.sh models/SmolLM2-135M-Instruct; do
  [ -e "$f" ] || { echo "pack-s11: $f is missing (scripts/gpu/build-cuda.sh; warpfold models fetch)" >&2; exit 1; }
done
dir=.gpu-extra/s11
rm -rf "$dir" && mkdir -p "$dir"
cp $G/warpfold.xz $G/run-on-gpu-machine.sh "$dir/"
tar -C models -cf "$dir/smollm2.tar" SmolLM2-135M-Instruct
du -sh "$dir"/*
PART_BYTES=${PART_BYTES:-57000000} bash bench/gpu/stream.sh pack "$dir" run-on-gpu-machine.sh warpfold.xz smollm2.tar
ls -la .gpu-extra/stream
