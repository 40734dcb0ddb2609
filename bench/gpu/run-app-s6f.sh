#!/usr/bin/env bash
# Session 6, sixth run (issue 14.3): the extraction workers spawned through prlimit (posix_spawn)
# instead of a pre_exec fork of the indexer. Before: the build of run s6d's "new" (.gpu-old, group
# commits, fork spawn); after: this one (.gpu). `warpfold index` of 600 generated PDFs, alternating
# before/after/after/before with MiniLM, before/after with BERT-large (random f16 weights), and each
# model's own rate on the chunks. Call 1: `bash bench/gpu/run-app-s5.sh models` carrying .gpu-extra.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
exec > >(tee "$OUT/run-app-s6f.log") 2>&1
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib WARPFOLD_MODELS_DIR=/tmp/wf-models WARPFOLD_LOG=warn
W=/tmp/warpfold
O=/tmp/warpfold-before
[ -x $W ] || bash .gpu/run-on-gpu-machine.sh .gpu/warpfold.xz --version | tail -1
[ -x $O ] || { xz -dc .gpu-old/warpfold.xz > $O && chmod +x $O; }
[ -d /tmp/wf-models/all-MiniLM-L6-v2 ] || { echo "no model: run the models call first"; exit 1; }
nproc; date -u; echo "prlimit: $(command -v prlimit || echo missing)"
$W --device cuda bench-index --pdfs 600 --search-chunks 0 --work-dir /tmp/f --out "$OUT/s6f-bench-index.json" 2>&1 | tail -2
P=$(dirname "$(find /tmp/f -name '*.pdf' | head -1)")
L=/tmp/wf-models/bert-large-random
bash bench/gpu/make-bert-large.sh >/dev/null 2>&1
run() { # label binary "global args"
  rm -f /tmp/f-run.db*
  echo "--- $1"
  $2 --device cuda $3 index $P --db /tmp/f-run.db 2>/dev/null | grep -E "tokens/s|time by stage"
}
own() {
  python3 - <<'PY'
import json, sqlite3
with open("/tmp/chunks.jsonl", "w") as f:
    for (text,) in sqlite3.connect("/tmp/f-run.db").execute("SELECT text FROM chunks"):
        f.write(json.dumps({"text": text}) + "\n")
PY
  echo "--- own rate"; $W --device cuda $1 embed --json < /tmp/chunks.jsonl 2>&1 >/dev/null | tail -1
}
echo "=== MiniLM"
run before $O ""; run after $W ""; run after $W ""; run before $O ""; own ""
echo "=== BERT-large"
run before $O "--model $L"; run after $W "--model $L"; own "--model $L"
echo "=== done"
