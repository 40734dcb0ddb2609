#!/usr/bin/env bash
# Session 6, fourth run (issue 14.3): before and after this session's indexing changes in ONE run on
# one machine (the H200 hosts differ from run to run: extraction alone took 4.2 s in session 5 and
# 5.7 s in run s6 on the same 600 PDFs). Before: the session-5 build (eff3a22, .gpu-old); after: this
# session's (.gpu). `warpfold index` of the same 600 PDFs, alternating old/new/new/old, MiniLM then
# BERT-large (random f16 weights); each model's own rate on the chunks; and the new build with half
# the workers (--jobs 8), to see how much of the device-bound gap is the host's load.
# Call 1: `bash bench/gpu/run-app-s5.sh models` carrying .gpu-extra; call 2: this, carrying .gpu and .gpu-old.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
exec > >(tee "$OUT/run-app-s6d.log") 2>&1
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib WARPFOLD_MODELS_DIR=/tmp/wf-models WARPFOLD_LOG=warn
W=/tmp/warpfold
O=/tmp/warpfold-old
[ -x $W ] || bash .gpu/run-on-gpu-machine.sh .gpu/warpfold.xz --version | tail -1
[ -x $O ] || { xz -dc .gpu-old/warpfold.xz > $O && chmod +x $O; }
[ -d /tmp/wf-models/all-MiniLM-L6-v2 ] || { echo "no model: run the models call first"; exit 1; }
nproc; date -u; grep -m1 "model name" /proc/cpuinfo
$W --device cuda bench-index --pdfs 600 --search-chunks 0 --work-dir /tmp/d --out "$OUT/s6d-bench-index.json" 2>&1 | tail -3
P=$(dirname "$(find /tmp/d -name '*.pdf' | head -1)")
L=/tmp/wf-models/bert-large-random
bash bench/gpu/make-bert-large.sh >/dev/null 2>&1
run() { # label binary "global args" index-args...
  local label=$1 bin=$2 global=$3; shift 3
  rm -f /tmp/d-run.db*
  echo "--- $label"
  $bin --device cuda $global index $P --db /tmp/d-run.db "$@" 2>/dev/null | grep -E "tokens/s|time by stage"
}
for m in "" "--model $L"; do
  echo "=== model: ${m:-MiniLM}"
  run old $O "$m"; run new $W "$m"; run new $W "$m"; run old $O "$m"
  run "new, --jobs 8" $W "$m" --jobs 8
  python3 - <<'PY'
import json, sqlite3
with open("/tmp/chunks.jsonl", "w") as f:
    for (text,) in sqlite3.connect("/tmp/d-run.db").execute("SELECT text FROM chunks"):
        f.write(json.dumps({"text": text}) + "\n")
PY
  echo "--- own rate"; $W --device cuda $m embed --json < /tmp/chunks.jsonl 2>&1 >/dev/null | tail -1
done
echo "=== done"
