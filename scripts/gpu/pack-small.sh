#!/usr/bin/env bash
# Packs what the GPU machine needs besides the binary when weights are generated there (the real
# ones do not fit the 64 MiB a call may carry next to the binary): all-MiniLM-L6-v2's config,
# tokenizer and sentence-transformers files (no weights), and the default chat model's tokenizer
# (tokenizer.json + tokenizer_config.json with its chat template, exported from the pinned GGUF).
# -> .gpu/meta.tar.xz; bench/gpu/prepare-device.sh unpacks it and makes random weights beside it.
set -euo pipefail
cd "$(dirname "$0")/../.."
./target/release/warpfold models fetch >/dev/null
stage=$(mktemp -d)
mkdir -p "$stage/minilm-meta" "$stage/smollm2-135m-tokenizer"
(cd models/all-MiniLM-L6-v2 && cp -r config.json tokenizer.json tokenizer_config.json special_tokens_map.json vocab.txt modules.json \
  sentence_bert_config.json config_sentence_transformers.json 1_Pooling "$stage/minilm-meta/")
cargo run --release -q -p warpfold-summarize --example export_hf_tokenizer -- \
  models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf "$stage/smollm2-135m-tokenizer"
mkdir -p .gpu
tar -C "$stage" -cf - minilm-meta smollm2-135m-tokenizer | xz -T2 -9 > .gpu/meta.tar.xz
rm -rf "$stage"
ls -la .gpu/meta.tar.xz
