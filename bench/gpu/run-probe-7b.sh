#!/usr/bin/env bash
# Third device run of 2026-11-30: the tiny Qwen2 reference check after the head-size fix, and the
# Qwen2.5-7B architecture with the VRAM probe choosing the bin size (logged trial by trial).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
exec > >(tee "$OUT/run-probe-7b.log") 2>&1
MODELS=qwen2.5-7b bash bench/gpu/prepare-device.sh
bash .gpu/run-on-gpu-machine.sh .gpu/warpfold.xz --version > /dev/null
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib WARPFOLD_MODELS_DIR=/tmp/wf-models WARPFOLD_LOG=warn
PY=/opt/torch/.venv/bin/python
W=/tmp/warpfold
ref=tests/fixtures/decoder_reference/qwen2
$PY -c "import json; [print(json.dumps({'ids': s['input_ids']})) for s in json.load(open('$ref/expected.json'))['sequences']]" \
  | timeout 120 $W --device cuda score --decoder $ref > "$OUT/score-qwen2.jsonl"
$PY bench/gpu/check.py decoder "$ref/expected.json" "$OUT/score-qwen2.jsonl" | tee -a "$OUT/checks.jsonl"
$W corpus --kind stress --documents 256 > /tmp/stress.jsonl
nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader,nounits -lms 500 > /tmp/smi.csv &
smi=$!
t=$(date +%s)
WARPFOLD_LOG=info timeout 200 $W --device cuda score --decoder /tmp/models/qwen2.5-7b --json < /tmp/stress.jsonl > "$OUT/wf-7b-probe.jsonl" 2> "$OUT/wf-7b-probe.err"
echo "7B with the probe: exit $? in $(( $(date +%s) - t )) s"
kill $smi
sed 's/\x1b\[[0-9;]*m//g' "$OUT/wf-7b-probe.err" | tail -25
echo "memory MiB, util% (every 2 s):"; awk 'NR % 4 == 0' /tmp/smi.csv | tr '\n' ' '; echo
