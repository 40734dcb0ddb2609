#!/usr/bin/env bash
# BERT-large's architecture (24 layers, 1,024 wide, 16 heads, 334M parameters) with random f16
# weights and MiniLM's tokenizer, in /tmp/wf-models/bert-large-random: a device-bound encoder for
# the indexing runs (honest for speed; the same file for every build compared). Needs MiniLM in
# /tmp/wf-models (the models call of run-app-window.sh) and the device's torch.
. "$(dirname "$0")/env.sh"
set -e
[ -f $L/model.safetensors ] && exit 0
mkdir -p /tmp/meta/bert-large && cp -r /tmp/wf-models/all-MiniLM-L6-v2/. /tmp/meta/bert-large/ && rm -f /tmp/meta/bert-large/model.safetensors
$PY - <<'PY'
import json
p = "/tmp/meta/bert-large/config.json"
c = json.load(open(p))
c.update(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096, max_position_embeddings=512)
json.dump(c, open(p, "w"), indent=1)
PY
$PY "$(dirname "$0")/make_random_encoder.py" /tmp/meta/bert-large $L
