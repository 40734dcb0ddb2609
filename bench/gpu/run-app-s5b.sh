#!/usr/bin/env bash
# Session 5, second GPU run (issue 14.3): after the workers were given a lower CPU priority. Same
# machine set-up as run-app-s5.sh (call 1: `bash bench/gpu/run-app-s5.sh models` carrying .gpu-extra;
# call 2: this script carrying .gpu):
#   1. bench-index on 600 generated PDFs with MiniLM, --window fixed then adaptive;
#   2. the app core (`warpfold serve`) watching them, adaptive;
#   3. the model's own rate on the chunks the app indexed (`warpfold embed` of ready texts);
#   4. a device-bound case: BERT-large's architecture (24 layers, 1024 wide; random f16 weights made
#      here with MiniLM's tokenizer), bench-index fixed then adaptive, and its own rate on the chunks.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
exec > >(tee "$OUT/run-app-b.log") 2>&1
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib WARPFOLD_MODELS_DIR=/tmp/wf-models WARPFOLD_LOG=warn
PY=/opt/torch/.venv/bin/python
[ -x "$PY" ] || PY=python3
W=/tmp/warpfold
[ -x $W ] || bash .gpu/run-on-gpu-machine.sh .gpu/warpfold.xz --version
[ -d /tmp/wf-models/all-MiniLM-L6-v2 ] || { echo "no model: run the models call first"; exit 1; }
nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv
nproc; date -u
echo "=== 1. bench-index, 600 PDFs, MiniLM: fixed window, then adaptive"
for w in fixed adaptive; do
  $W --device cuda --window $w bench-index --pdfs 600 --search-chunks 0 --work-dir /tmp/bi-$w --out "$OUT/b-bench-index-$w.json" 2>&1 | tail -3
done
echo "=== 2. the app core watching the same 600 PDFs"
python3 bench/gpu/app_core.py $W /tmp/bi-adaptive/pdfs "$OUT/b-app-adaptive.json" --window adaptive | grep -v '^  ' | tail -24
echo "=== 3. MiniLM's own rate on the chunks the app indexed"
python3 - <<'EOF'
import glob, json, sqlite3
db = sorted(glob.glob("/tmp/app-adaptive-*/index.db"))[-1]
with open("/tmp/chunks.jsonl", "w") as f:
    for (text,) in sqlite3.connect(db).execute("SELECT text FROM chunks"):
        f.write(json.dumps({"text": text}) + "\n")
EOF
$W --device cuda embed --json < /tmp/chunks.jsonl 2>&1 >/dev/null | tail -1
echo "=== 4. BERT-large architecture (random weights): device-bound"
L=/tmp/wf-models/bert-large-random
if [ ! -f $L/model.safetensors ]; then
  mkdir -p /tmp/meta/bert-large && cp -r /tmp/wf-models/all-MiniLM-L6-v2/. /tmp/meta/bert-large/ && rm -f /tmp/meta/bert-large/model.safetensors
  $PY - <<'EOF'
import json
p = "/tmp/meta/bert-large/config.json"
c = json.load(open(p))
c.update(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096, max_position_embeddings=512)
json.dump(c, open(p, "w"), indent=1)
EOF
  $PY bench/gpu/make_random_encoder.py /tmp/meta/bert-large $L
fi
for w in fixed adaptive; do
  $W --device cuda --model $L --window $w bench-index --pdfs 600 --search-chunks 0 --work-dir /tmp/bl-$w --out "$OUT/b-large-bench-index-$w.json" 2>&1 | tail -3
done
$W --device cuda --model $L embed --json < /tmp/chunks.jsonl 2>&1 >/dev/null | tail -1
echo "=== done"
