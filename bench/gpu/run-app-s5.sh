#!/usr/bin/env bash
# Session 5 (issue 14): the app core on the GPU, with the flash-attn build, after the adaptive window.
# Call 1 carries .gpu-extra (the f16 MiniLM: `bash bench/gpu/run-app-s5.sh models`); call 2, on the
# same warm machine, carries .gpu (the binary) and runs everything else:
#   1. bench-index on 600 generated PDFs, --window fixed (the source project's trigger) then adaptive:
#      the before/after of the indexing path, with its stage times, bin fill and device idle;
#   2. the app core (`warpfold serve`, what the desktop runs) watching the same PDFs, adaptive then
#      fixed, searches asked all along (latency under load), /api/state and /metrics kept;
#   3. the model's own rate on the very chunks the app indexed (`warpfold embed` of ready texts);
#   4. the app core again under --vram-budget 8GiB (a gaming card).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
if [ "${1:-}" = models ]; then
  mkdir -p /tmp/wf-models && xz -dc .gpu-extra/minilm-f16.tar.xz | tar -C /tmp/wf-models -xf - && ls /tmp/wf-models
  exit
fi
exec > >(tee "$OUT/run-app.log") 2>&1
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib WARPFOLD_MODELS_DIR=/tmp/wf-models WARPFOLD_LOG=warn
W=/tmp/warpfold
[ -x $W ] || bash .gpu/run-on-gpu-machine.sh .gpu/warpfold.xz --version
[ -d /tmp/wf-models/all-MiniLM-L6-v2 ] || { echo "no model: run the models call first"; exit 1; }
nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv
nproc; date -u
echo "=== 1. bench-index, 600 PDFs: fixed window, then adaptive"
for w in fixed adaptive; do
  $W --device cuda --window $w bench-index --pdfs 600 --search-chunks 0 --work-dir /tmp/bi-$w --out "$OUT/bench-index-$w.json" 2>&1 | tail -12
done
echo "=== 2. the app core watching the same 600 PDFs"
for w in adaptive fixed; do
  python3 bench/gpu/app_core.py $W /tmp/bi-adaptive/pdfs "$OUT/app-$w.json" --window $w | tail -30
done
echo "=== 3. the model's own rate on the chunks the app indexed"
python3 - <<'EOF'
import glob, json, sqlite3
db = sorted(glob.glob("/tmp/app-adaptive-*/index.db"))[-1]
with open("/tmp/chunks.jsonl", "w") as f:
    for (text,) in sqlite3.connect(db).execute("SELECT text FROM chunks"):
        f.write(json.dumps({"text": text}) + "\n")
print("chunks dumped from", db)
EOF
wc -l /tmp/chunks.jsonl
for i in 1 2; do $W --device cuda embed --json < /tmp/chunks.jsonl > /dev/null 2> "$OUT/embed-chunks-$i.txt"; tail -1 "$OUT/embed-chunks-$i.txt"; done
echo "=== 4. the app core under an 8 GiB budget"
python3 bench/gpu/app_core.py $W /tmp/bi-adaptive/pdfs "$OUT/app-8gib.json" --extra --vram-budget 8GiB | tail -30
echo "=== done"
