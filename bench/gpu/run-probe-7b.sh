#!/usr/bin/env bash
# Third device run of 2026-11-30: the tiny Qwen2 reference check after the head-size fix, and the
# Qwen2.5-7B architecture with the VRAM probe choosing the bin size (logged trial by trial).
. "$(dirname "$0")/env.sh"
log_to run-probe-7b.log
MODELS=qwen2.5-7b bash bench/gpu/prepare-device.sh
unpack_warpfold > /dev/null
check_decoder qwen2 120
$W corpus --kind stress --documents 256 > /tmp/stress.jsonl
nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader,nounits -lms 500 > /tmp/smi.csv &
smi=$!
t=$(date +%s)
WARPFOLD_LOG=info timeout 200 $W --device cuda score --decoder /tmp/models/qwen2.5-7b --json < /tmp/stress.jsonl > "$OUT/wf-7b-probe.jsonl" 2> "$OUT/wf-7b-probe.err"
echo "7B with the probe: exit $? in $(( $(date +%s) - t )) s"
kill $smi
sed 's/\x1b\[[0-9;]*m//g' "$OUT/wf-7b-probe.err" | tail -25
echo "memory MiB, util% (every 2 s):"; awk 'NR % 4 == 0' /tmp/smi.csv | tr '\n' ' '; echo
