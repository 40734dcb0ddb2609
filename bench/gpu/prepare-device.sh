#!/usr/bin/env bash
# First call on a fresh GPU machine: unpack the carried f16 MiniLM into /tmp/wf-models and generate the
# random-weight decoders into /tmp/models (both stay while the machine is held).
. "$(dirname "$0")/env.sh"
if [ -f .gpu/minilm-f16.tar.xz ]; then
  unpack_minilm .gpu/minilm-f16.tar.xz && echo "unpacked MiniLM (f16)"
fi
if [ -f .gpu/meta.tar.xz ]; then
  unpack_meta && echo "unpacked model metadata"
fi
for m in ${MODELS:-smollm2-360m qwen2.5-7b}; do
  t=$(date +%s)
  case $m in
    minilm-random)  # MiniLM's architecture, random f16 weights, its real tokenizer
      [ -f /tmp/wf-models/minilm-random/model.safetensors ] || $PY bench/gpu/make_random_encoder.py /tmp/meta/minilm-meta /tmp/wf-models/minilm-random
      echo "$m ready in $(( $(date +%s) - t )) s"; continue;;
    smollm2-135m)  # the default chat model's architecture, random bf16 weights, its real tokenizer and template
      [ -f /tmp/models/$m/config.json ] || $PY bench/gpu/make_random_decoder.py $m /tmp/models/$m
      cp /tmp/meta/smollm2-135m-tokenizer/* /tmp/models/$m/
      echo "$m ready in $(( $(date +%s) - t )) s"; continue;;
  esac
  t=$(date +%s)
  [ -f /tmp/models/$m/config.json ] || $PY bench/gpu/make_random_decoder.py $m /tmp/models/$m
  echo "$m ready in $(( $(date +%s) - t )) s"
done
df -h /tmp | tail -1
