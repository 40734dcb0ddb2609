#!/usr/bin/env bash
# What bench/gpu/run-7b-careful.sh and run-minilm-e2e.sh need on the GPU
# machine, packed into one stream of parts (bench/gpu/stream.sh): run-on-gpu-machine.sh, MiniLM in f16
# with its sentence-transformers files, the CUDA binary (scripts/gpu/build-cuda.sh) and the candle test
# binary with the gated GPU tests (scripts/gpu/build-cuda-tests.sh) when it was built. Build first.
set -euo pipefail
cd "$(dirname "$0")/../.."
G=${GPU_DIR:-.gpu}
for f in $G/warpfold.xz $G/run-on-gpu-machine.sh models/all-MiniLM-L6-v2/model.safetensors; do
  [ -f "$f" ] || { echo "pack-minilm-tests: $f is missing (scripts/gpu/build-cuda.sh, build-cuda-tests.sh; warpfold models fetch)" >&2; exit 1; }
done
dir=.gpu-extra/minilm-tests
rm -rf "$dir" && mkdir -p "$dir"
cp $G/warpfold.xz $G/run-on-gpu-machine.sh "$dir/"
tests=() && [ -f $G/candle-tests.xz ] && cp $G/candle-tests.xz "$dir/" && tests=(candle-tests.xz)
stage=$(mktemp -d) && cp -r models/all-MiniLM-L6-v2 "$stage/" && rm "$stage/all-MiniLM-L6-v2/model.safetensors"
python3 bench/gpu/to_f16.py models/all-MiniLM-L6-v2/model.safetensors "$stage/all-MiniLM-L6-v2/model.safetensors"
tar -C "$stage" -cf - all-MiniLM-L6-v2 | xz -T2 -6 > "$dir/minilm-f16.tar.xz" && rm -rf "$stage"
du -sh "$dir"/*
bash bench/gpu/stream.sh pack "$dir" run-on-gpu-machine.sh minilm-f16.tar.xz warpfold.xz "${tests[@]}"
ls -la .gpu-extra/stream
