#!/usr/bin/env bash
# Session 6, third run (issue 14.3): what the writer and the device thread wait on during bench-index
# (thread_sampler.py: states, system calls, time on and waiting for a core), MiniLM and BERT-large
# on 600 PDFs. Set-up as run-app-s6.sh (the machine still warm from run-app-s6b.sh).
. "$(dirname "$0")/env.sh"
log_to run-app-s6c.log
need_warpfold | tail -1
[ -f $L/model.safetensors ] || { echo "run run-app-s6b.sh first"; exit 1; }
P=$(pdf_dir /tmp/bi8)
echo "PDFs in $P: $(ls $P | wc -l)"
echo "=== MiniLM, 600 PDFs (warpfold index: the main thread is the writer)"
python3 bench/gpu/thread_sampler.py "$OUT/s6c-minilm-threads.json" -- $W --device cuda index $P --db /tmp/s6c-m.db
python3 -c "import json; print(json.load(open('$OUT/s6c-minilm-threads.json'))['stderr_tail'][-900:])"
echo "=== BERT-large, 600 PDFs"
python3 bench/gpu/thread_sampler.py "$OUT/s6c-large-threads.json" -- $W --device cuda --model $L index $P --db /tmp/s6c-l.db
python3 -c "import json; print(json.load(open('$OUT/s6c-large-threads.json'))['stderr_tail'][-900:])"
df -h /tmp | tail -1; cat /sys/block/vda/queue/rotational 2>/dev/null; ls /sys/block/
