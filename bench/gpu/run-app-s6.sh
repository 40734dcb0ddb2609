#!/usr/bin/env bash
# Session 6 (issue 14.3): the app core on the GPU after group commits (the writer bound session 5's
# runs at 11.6 ms per document) and a larger in-flight budget (8 bins). Same set-up as run-app-s5.sh:
# call 1 `bash bench/gpu/run-app-s5.sh models` carrying .gpu-extra, call 2 this script carrying .gpu.
#   1. bench-index on 600 generated PDFs with MiniLM (stage times, fill, device idle);
#   2. the app core (`warpfold serve`, what the desktop runs) watching them, then under --vram-budget 8GiB;
#   3. MiniLM's own rate on the chunks the app indexed (`warpfold embed` of ready texts);
#   4. device-bound: BERT-large's architecture (random f16 weights, MiniLM's tokenizer) on 2,000 PDFs
#      with bench-index and the app core, and its own rate on the same chunks.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
exec > >(tee "$OUT/run-app-s6.log") 2>&1
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib WARPFOLD_MODELS_DIR=/tmp/wf-models WARPFOLD_LOG=warn
W=/tmp/warpfold
[ -x $W ] || bash .gpu/run-on-gpu-machine.sh .gpu/warpfold.xz --version
[ -d /tmp/wf-models/all-MiniLM-L6-v2 ] || { echo "no model: run the models call first"; exit 1; }
nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv
nproc; date -u
own_rate() { # model, database: the model's own rate on the chunks of that index
  python3 - "$2" <<'PY'
import json, sqlite3, sys
with open("/tmp/chunks.jsonl", "w") as f:
    for (text,) in sqlite3.connect(sys.argv[1]).execute("SELECT text FROM chunks"):
        f.write(json.dumps({"text": text}) + "\n")
PY
  $W --device cuda ${1:+--model $1} embed --json < /tmp/chunks.jsonl 2>&1 >/dev/null | tail -1
}
echo "=== 1. bench-index, 600 PDFs, MiniLM"
$W --device cuda bench-index --pdfs 600 --search-chunks 0 --work-dir /tmp/bi --out "$OUT/s6-bench-index.json" 2>&1 | tail -12
echo "=== 2. the app core watching the same 600 PDFs; then under an 8 GiB budget"
python3 bench/gpu/app_core.py $W /tmp/bi/pdfs "$OUT/s6-app.json" --window adaptive | grep -v '^  ' | tail -24
python3 bench/gpu/app_core.py $W /tmp/bi/pdfs "$OUT/s6-app-8gib.json" --window adaptive --extra --vram-budget 8GiB | grep -v '^  ' | tail -24
echo "=== 3. MiniLM's own rate on the chunks the app indexed"
own_rate "" "$(ls -td /tmp/app-adaptive-*/index.db | head -1)"
echo "=== 4. BERT-large architecture (random weights): device-bound, 2,000 PDFs"
L=/tmp/wf-models/bert-large-random
bash bench/gpu/make-bert-large.sh >/dev/null 2>&1
$W --device cuda --model $L bench-index --pdfs 2000 --search-chunks 0 --work-dir /tmp/bl --out "$OUT/s6-large-bench-index.json" 2>&1 | tail -12
python3 bench/gpu/app_core.py $W /tmp/bl/pdfs "$OUT/s6-large-app.json" --window adaptive --extra --model $L | grep -v '^  ' | tail -24
own_rate $L "$(ls -td /tmp/app-adaptive-*/index.db | head -1)"
echo "=== done"
