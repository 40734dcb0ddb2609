#!/usr/bin/env bash
# Session 7 (issue 14.3): the bulk lane's bin fill measured apart from the bins that answer searches
# (/metrics warpfold_bulk_bin_fill_ratio, new this session), with BERT-large (random f16, device-bound)
# and MiniLM, through the indexer (`warpfold index`) and the app core (`warpfold serve` watching the
# folder, what the desktop runs), each with the model's own rate on the very chunks. 1,200 generated
# PDFs (twice session 6's 600, so the partial first and last bins weigh half as much).
# Call 1: `bash bench/gpu/run-app-s5.sh models` carrying .gpu-extra/minilm-f16.tar.xz; call 2 this,
# carrying .gpu, on the same warm machine. TAG names the outputs (s7; s7b: the rerun after the
# query and wake-up changes, set up from bench/gpu/stream.sh by run-s7b.sh).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
TAG=${TAG:-s7}
exec > >(tee "$OUT/run-app-$TAG.log") 2>&1
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib WARPFOLD_MODELS_DIR=/tmp/wf-models WARPFOLD_LOG=warn
W=/tmp/warpfold
[ -x $W ] || bash .gpu/run-on-gpu-machine.sh .gpu/warpfold.xz --version | tail -1
[ -d /tmp/wf-models/all-MiniLM-L6-v2 ] || { echo "no model: run the models call first"; exit 1; }
nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader
nproc; date -u
$W --device cuda bench-index --pdfs 1200 --search-chunks 0 --work-dir /tmp/f --out "$OUT/$TAG-bench-index.json" 2>&1 | tail -2
P=$(dirname "$(find /tmp/f -name '*.pdf' | head -1)")
echo "documents: $(ls $P | wc -l)"
L=/tmp/wf-models/bert-large-random
bash bench/gpu/make-bert-large.sh >/dev/null 2>&1
own() { # "global args" db
  python3 - "$2" <<'PY'
import json, sqlite3, sys
with open("/tmp/chunks.jsonl", "w") as f:
    for (text,) in sqlite3.connect(sys.argv[1]).execute("SELECT text FROM chunks"):
        f.write(json.dumps({"text": text}) + "\n")
PY
  echo "--- own rate"; $W --device cuda $1 embed --json < /tmp/chunks.jsonl 2>&1 >/dev/null | tail -1
}
keys="seconds|tokens_per|fill|starved|bins|query_ms_p|documents_per"
for m in large minilm; do
  args=""; [ $m = large ] && args="--model $L"
  echo "=== $m: the indexer"
  rm -f /tmp/f-run.db*
  $W --device cuda $args index $P --db /tmp/f-run.db 2>/dev/null | grep -E "tokens/s|time by stage"
  own "$args" /tmp/f-run.db
  echo "=== $m: the app core"
  python3 bench/gpu/app_core.py $W $P "$OUT/$TAG-$m-app.json" --window adaptive ${args:+--extra $args} | grep -v '^  ' | grep -E "$keys"
done
echo "=== done"
