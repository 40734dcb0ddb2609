#!/usr/bin/env bash
# Second device run of 2026-11-30: the decoder reference checks (after the probe-id fix), a logged
# Qwen2.5-7B run on 16 documents, then the 7B and memory-cap benchmarks of run-decoders.sh.
. "$(dirname "$0")/env.sh"
log_to run-diagnose.log
bash bench/gpu/prepare-device.sh
unpack_warpfold > /dev/null
for m in qwen2 llama3; do check_decoder $m 120; done
$W corpus --kind stress --documents 16 > /tmp/stress16.jsonl
nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader,nounits -lms 200 > /tmp/smi-diag.csv &
smi=$!
t=$(date +%s)
WARPFOLD_LOG=info timeout 150 $W --device cuda --bin-tokens 32768 score --decoder /tmp/models/qwen2.5-7b --json < /tmp/stress16.jsonl > /tmp/diag.jsonl 2> "$OUT/diag-7b.err"
echo "7B, 16 documents, bins of 32768: exit $? in $(( $(date +%s) - t )) s"
kill $smi
tail -8 "$OUT/diag-7b.err"
echo "memory MiB / util% samples (every 10th):"; awk 'NR % 10 == 0' /tmp/smi-diag.csv | tr '\n' ' '; echo
MODELS=qwen2.5-7b WF_ARGS="--bin-tokens 65536" WF_TIMEOUT=150 timeout 330 bash bench/gpu/run-decoders.sh > /dev/null 2>&1
grep -v "Loading weights" "$OUT/run-decoders.log" | tail -30
