#!/usr/bin/env bash
# First call on a fresh GPU machine: unpack the carried f16 MiniLM into /tmp/wf-models and generate the
# random-weight decoders into /tmp/models (both stay while the machine is held).
set -uo pipefail
PY=/opt/torch/.venv/bin/python
[ -x "$PY" ] || PY=python3
if [ -f .gpu/minilm-f16.tar.xz ]; then
  mkdir -p /tmp/wf-models && xz -dc .gpu/minilm-f16.tar.xz | tar -C /tmp/wf-models -xf - && echo "unpacked MiniLM (f16)"
fi
for m in ${MODELS:-smollm2-360m qwen2.5-7b}; do
  t=$(date +%s)
  [ -f /tmp/models/$m/config.json ] || $PY bench/gpu/make_random_decoder.py $m /tmp/models/$m
  echo "$m ready in $(( $(date +%s) - t )) s"
done
df -h /tmp | tail -1
