#!/usr/bin/env bash
# Session 6, last run (issue 14.3): the app core (`warpfold serve`, what the desktop runs) watching the
# 600 PDFs of run s6f with this session's build, BERT-large then MiniLM; on the machine s6f left warm.
. "$(dirname "$0")/env.sh"
log_to run-app-s6g.log
P=$(pdf_dir /tmp/f)
python3 bench/gpu/app_core.py $W $P "$OUT/s6g-large-app.json" --window adaptive --extra --model $L | grep -v '^  ' | grep -E "seconds|tokens_per|fill|starved|bins|query_ms_p"
python3 bench/gpu/app_core.py $W $P "$OUT/s6g-app.json" --window adaptive | grep -v '^  ' | grep -E "seconds|tokens_per|fill|starved|bins|query_ms_p"
