#!/usr/bin/env bash
# Session 6, last run (issue 14.3): the app core (`warpfold serve`, what the desktop runs) watching the
# 600 PDFs of run s6f with this session's build, BERT-large then MiniLM; on the machine s6f left warm.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
exec > >(tee "$OUT/run-app-s6g.log") 2>&1
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib WARPFOLD_MODELS_DIR=/tmp/wf-models WARPFOLD_LOG=warn
W=/tmp/warpfold
P=$(dirname "$(find /tmp/f -name '*.pdf' | head -1)")
L=/tmp/wf-models/bert-large-random
python3 bench/gpu/app_core.py $W $P "$OUT/s6g-large-app.json" --window adaptive --extra --model $L | grep -v '^  ' | grep -E "seconds|tokens_per|fill|starved|bins|query_ms_p"
python3 bench/gpu/app_core.py $W $P "$OUT/s6g-app.json" --window adaptive | grep -v '^  ' | grep -E "seconds|tokens_per|fill|starved|bins|query_ms_p"
