#!/usr/bin/env bash
# all-MiniLM-L6-v2 with its real weights on the GPU machine, in a call that follows run-all.sh on the
# same (still warm) machine: the binary is already unpacked at /tmp/warpfold, and this call carries
# only .gpu-extra/minilm-f16.tar.xz (the weights do not fit the 64 MiB carry next to the binary).
# Correctness against sentence-transformers' vectors of the fixture texts, the VRAM probe, then
# `warpfold bench` packed vs padded vs sentence-transformers on the same GPU (model time and end to
# end, texts in).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
exec > >(tee "$OUT/run-minilm.log") 2>&1
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib WARPFOLD_MODELS_DIR=/tmp/wf-models WARPFOLD_LOG=warn
PY=/opt/torch/.venv/bin/python
W=/tmp/warpfold
[ -x $W ] || { [ -f .gpu/warpfold.xz ] && bash .gpu/run-on-gpu-machine.sh .gpu/warpfold.xz --version; }
[ -x $W ] || { echo "no /tmp/warpfold: run run-all.sh first on this machine, or carry .gpu"; exit 1; }
mkdir -p /tmp/wf-models && xz -dc .gpu-extra/minilm-f16.tar.xz | tar -C /tmp/wf-models -xf -
$PY -c "import sentence_transformers as s, torch, transformers; print('sentence-transformers', s.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__)"
echo "=== MiniLM on the GPU vs sentence-transformers (fixture vectors)"
$PY -c "import json; [print(json.dumps({'text': i['text']})) for i in json.load(open('tests/fixtures/minilm_reference.json'))['items']]" \
  | $W --device cuda embed > "$OUT/minilm-fixture.jsonl"
$PY bench/gpu/check.py minilm tests/fixtures/minilm_reference.json "$OUT/minilm-fixture.jsonl" | tee -a "$OUT/checks.jsonl"
echo "=== VRAM probe"
echo '{"text": "probe"}' | WARPFOLD_LOG=info $W --device cuda embed 2>&1 >/dev/null | grep -i probe | tail -2
echo "=== MiniLM speed: packed vs padded vs sentence-transformers, same texts"
$W --device cuda --bin-tokens ${BIN:-16384} bench --documents 2048 --peer --peer-python "$PY" --out "$OUT/gpu-minilm.json"
echo "=== done"
