#!/usr/bin/env bash
# Second device run of 2026-11-30: the decoder reference checks (after the probe-id fix), a logged
# Qwen2.5-7B run on 16 documents, then the 7B and memory-cap benchmarks of run-decoders.sh.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
exec > >(tee "$OUT/run-diagnose.log") 2>&1
bash bench/gpu/prepare-device.sh
bash .gpu/run-on-gpu-machine.sh .gpu/warpfold.xz --version > /dev/null
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib WARPFOLD_MODELS_DIR=/tmp/wf-models WARPFOLD_LOG=warn
PY=/opt/torch/.venv/bin/python
W=/tmp/warpfold
for m in qwen2 llama3; do
  ref=tests/fixtures/decoder_reference/$m
  $PY -c "import json; [print(json.dumps({'ids': s['input_ids']})) for s in json.load(open('$ref/expected.json'))['sequences']]" \
    | timeout 120 $W --device cuda score --decoder $ref > "$OUT/score-$m.jsonl"
  $PY bench/gpu/check.py decoder "$ref/expected.json" "$OUT/score-$m.jsonl" | tee -a "$OUT/checks.jsonl"
done
$W corpus --kind stress --documents 16 > /tmp/s16.jsonl
nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader,nounits -lms 200 > /tmp/smi-diag.csv &
smi=$!
t=$(date +%s)
WARPFOLD_LOG=info timeout 150 $W --device cuda --bin-tokens 32768 score --decoder /tmp/models/qwen2.5-7b --json < /tmp/s16.jsonl > /tmp/diag.jsonl 2> "$OUT/diag-7b.err"
echo "7B, 16 documents, bins of 32768: exit $? in $(( $(date +%s) - t )) s"
kill $smi
tail -8 "$OUT/diag-7b.err"
echo "memory MiB / util% samples (every 10th):"; awk 'NR % 10 == 0' /tmp/smi-diag.csv | tr '\n' ' '; echo
MODELS=qwen2.5-7b WF_ARGS="--bin-tokens 65536" WF_TIMEOUT=150 timeout 330 bash bench/gpu/run-decoders.sh > /dev/null 2>&1
grep -v "Loading weights" "$OUT/run-decoders.log" | tail -30
