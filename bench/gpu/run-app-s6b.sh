#!/usr/bin/env bash
# Session 6, second run (issue 14.3): where the writer's time goes on the GPU machine (its processor
# time and transactions are now in the report), and whether the in-flight budget (4 or 8 bins) is
# what changed BERT-large's rate between session 5 (600 PDFs, 4 bins: 91% of its own rate while
# busy) and run s6 (2,000 PDFs, 8 bins: 66%). Set-up as run-app-s6.sh.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
exec > >(tee "$OUT/run-app-s6b.log") 2>&1
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib WARPFOLD_MODELS_DIR=/tmp/wf-models WARPFOLD_LOG=warn
W=/tmp/warpfold
rm -f $W; bash .gpu/run-on-gpu-machine.sh .gpu/warpfold.xz --version | tail -1
[ -d /tmp/wf-models/all-MiniLM-L6-v2 ] || { echo "no model: run the models call first"; exit 1; }
nproc; date -u
summary() {
  python3 - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["indexing"]["run"]
st = r["stages"]
busy = r["backend_busy_seconds"]
print(f'  {r["tokens"]} tokens in {r["seconds"]:.2f} s = {r["tokens_per_second"]:.0f} tok/s; busy {busy:.2f} s '
      f'({r["tokens"]/busy:.0f} tok/s while busy), {r["bins"]} bins, fill {r["mean_bin_fill"]:.2f}, starved {r["device_starved_seconds"]:.3f} s')
print(f'  stages: extract {st["extract"]:.1f}, chunk {st["chunk"]:.1f}, submit {st["submit"]:.2f}, embed_wait {st["embed_wait"]:.2f}, '
      f'write {st["write"]:.2f} s ({st["write_cpu"]:.2f} s on a core, {st["write_transactions"]} transactions)')
PY
}
echo "=== 1. MiniLM, 600 PDFs: in-flight 8 bins, then 4"
for b in 8 4; do
  WARPFOLD_IN_FLIGHT_BINS=$b $W --device cuda bench-index --pdfs 600 --search-chunks 0 --work-dir /tmp/bi$b --out "$OUT/s6b-minilm-$b.json" >/dev/null 2>&1
  echo "in-flight $b:"; summary "$OUT/s6b-minilm-$b.json"
done
L=/tmp/wf-models/bert-large-random
bash bench/gpu/make-bert-large.sh >/dev/null 2>&1
echo "=== 2. BERT-large (random weights), 600 then 2,000 PDFs: in-flight 4, then 8"
for n in 600 2000; do for b in 4 8; do
  WARPFOLD_IN_FLIGHT_BINS=$b $W --device cuda --model $L bench-index --pdfs $n --search-chunks 0 --work-dir /tmp/bl$n-$b --out "$OUT/s6b-large-$n-$b.json" >/dev/null 2>&1
  echo "$n PDFs, in-flight $b:"; summary "$OUT/s6b-large-$n-$b.json"
done; done
echo "=== 3. BERT-large's own rate on the 2,000 PDFs' chunks (the last index)"
python3 - <<'PY'
import glob, json, os, sqlite3
db = max(glob.glob("/tmp/bl2000-8/**/*.db", recursive=True), key=os.path.getmtime)
with open("/tmp/chunks.jsonl", "w") as f:
    for (text,) in sqlite3.connect(db).execute("SELECT text FROM chunks"):
        f.write(json.dumps({"text": text}) + "\n")
PY
$W --device cuda --model $L embed --json < /tmp/chunks.jsonl 2>&1 >/dev/null | tail -1
echo "=== done"
