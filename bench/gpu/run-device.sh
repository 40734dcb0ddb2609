#!/usr/bin/env bash
# The GPU run, in one call on the GPU machine (see scripts/gpu/build-cuda.sh and pack-models.sh, which
# put warpfold.xz, run-on-gpu-machine.sh and minilm-f16.tar.xz in .gpu/):
#   1. environment: GPU, driver, PyTorch / transformers / sentence-transformers versions;
#   2. correctness on the GPU: the decoder (FlashAttention-2 varlen, causal, bf16) on the tiny
#      transformers reference checkpoints; MiniLM (FA-2 varlen, non-causal, f16) against
#      sentence-transformers' vectors of the 24 fixture texts;
#   3. speed: `warpfold bench --device cuda` (packed vs padded on the same ids, stress and production
#      corpora), with sentence-transformers on the same GPU as the peer when it is installed.
# Results land in $OUT (the device tool brings them back).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
exec > >(tee "$OUT/run-device.log") 2>&1
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib
PY=/opt/torch/.venv/bin/python
[ -x "$PY" ] || PY=python3
nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader
$PY -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
if $PY -c "import sentence_transformers as s; print('sentence-transformers', s.__version__)"; then PEER=(--peer --peer-python "$PY"); else PEER=(); echo "no sentence-transformers: no peer run"; fi

bash .gpu/run-on-gpu-machine.sh .gpu/warpfold.xz --version
W=/tmp/warpfold
[ -f /tmp/wf-models/all-MiniLM-L6-v2/model.safetensors ] || bash bench/gpu/prepare-device.sh
export WARPFOLD_MODELS_DIR=/tmp/wf-models WARPFOLD_LOG=warn

echo "=== JIT warm-up (first CUDA ops on a fresh machine compile candle's PTX)"
t=$(date +%s); echo '{"text": "warm up"}' | $W --device cuda embed > /dev/null; echo "warm-up $(( $(date +%s) - t )) s"

echo "=== decoder on the GPU vs transformers (tiny reference checkpoints)"
for m in qwen2 llama3; do
  ref=tests/fixtures/decoder_reference/$m
  $PY -c "import json,sys; [print(json.dumps({'ids': s['input_ids']})) for s in json.load(open('$ref/expected.json'))['sequences']]" \
    | $W --device cuda score --decoder $ref > "$OUT/score-$m.jsonl"
  $PY bench/gpu/check.py decoder "$ref/expected.json" "$OUT/score-$m.jsonl" | tee -a "$OUT/checks.jsonl"
done

echo "=== MiniLM on the GPU vs sentence-transformers (fixture vectors)"
$PY -c "import json; [print(json.dumps({'text': i['text']})) for i in json.load(open('tests/fixtures/minilm_reference.json'))['items']]" \
  | $W --device cuda embed > "$OUT/minilm-fixture.jsonl"
$PY bench/gpu/check.py minilm tests/fixtures/minilm_reference.json "$OUT/minilm-fixture.jsonl" | tee -a "$OUT/checks.jsonl"

echo "=== VRAM probe: MiniLM, whole card and under an 8 GiB budget"
echo '{"text": "probe"}' | $W --device cuda embed > /dev/null
echo '{"text": "probe"}' | $W --device cuda --vram-budget 8GiB embed > /dev/null

echo "=== MiniLM speed: packed vs padded (and the peer), same ids"
$W --device cuda --bin-tokens 16384 bench --documents 2048 --packer-sequences 100000 "${PEER[@]}" --out "$OUT/gpu-minilm.json"
echo "=== done"
