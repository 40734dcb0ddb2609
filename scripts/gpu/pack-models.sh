#!/usr/bin/env bash
# Packs the default embedding model for the GPU machine (no network there, 64 MiB per call): an f16
# copy of all-MiniLM-L6-v2 with its tokenizer and sentence-transformers files, xz-compressed into
# .gpu/minilm-f16.tar.xz. bench/gpu/run-device.sh unpacks it.
set -euo pipefail
cd "$(dirname "$0")/../.."
src=models/all-MiniLM-L6-v2
[ -f "$src/model.safetensors" ] || ./target/release/warpfold models fetch
stage=$(mktemp -d)
mkdir -p "$stage/all-MiniLM-L6-v2"
(cd "$src" && cp -r config.json tokenizer.json tokenizer_config.json special_tokens_map.json vocab.txt modules.json \
  sentence_bert_config.json config_sentence_transformers.json 1_Pooling "$stage/all-MiniLM-L6-v2/")
python3 bench/gpu/to_f16.py "$src/model.safetensors" "$stage/all-MiniLM-L6-v2/model.safetensors"
mkdir -p .gpu
tar -C "$stage" -cf - all-MiniLM-L6-v2 | xz -T2 -6 > .gpu/minilm-f16.tar.xz
rm -rf "$stage"
ls -la .gpu/minilm-f16.tar.xz
