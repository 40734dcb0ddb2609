#!/usr/bin/env bash
# Session 7 (issue 15.4/15.5): the two default chat models with their real weights on the GPU, and
# warpfold's summaries against the pipeline a user would assemble with transformers, on the machine
# run-s7b.sh set up (/tmp/st, /tmp/warpfold).
#   1. the documents of tests/summary_quality.rs (/tmp/st/kd, 3 documents, chunks of 1,280 as in the
#      test) with Qwen2.5-Coder-1.5B-Instruct and SmolLM2-135M-Instruct: loops and key facts (scored
#      on the build machine by examples/summary_settings --score);
#   2. 48 generated reports of 400-6,000 words (/tmp/st/kb; bench/gpu/summary-bench-words.txt),
#      each with five known facts: warpfold with the 1.5B model, whole GPU and --vram-budget 8GiB;
#      the transformers pipeline (bench/gpu/peer_summarize.py, the same GGUF dequantized to bf16,
#      length-sorted batches) uncapped and capped at 8 GiB; SmolLM2 with warpfold for its speed.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
exec > >(tee "$OUT/run-summarize-s7.log") 2>&1
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib WARPFOLD_MODELS_DIR=/tmp/wf-models WARPFOLD_LOG=warn
W=/tmp/warpfold
Q=/tmp/st/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
S=/tmp/st/SmolLM2-135M-Instruct.Q4_1.gguf
sha256sum $Q $S
PY=/opt/torch/.venv/bin/python
[ -x $PY ] || PY=python3
mkdir -p /tmp/pylib && $PY -m pip install --no-deps --no-index --target /tmp/pylib /tmp/st/gguf-*.whl -q 2>&1 | tail -2
export PYTHONPATH=/tmp/pylib
$PY -c "import transformers, torch, gguf; print('transformers', transformers.__version__, 'torch', torch.__version__, 'gguf', gguf.__version__)"
summ() { # label decoder folder extra...
  local label=$1 dec=$2 dir=$3; shift 3
  echo "--- warpfold $label"
  /usr/bin/time -f "wall %e s, max RSS %M KiB" $W --device cuda summarize "$dir" --decoder "$dec" --json "$@" > "$OUT/$label.jsonl" 2> "$OUT/$label.err"
  tail -2 "$OUT/$label.err"
}
echo "=== 1. the quality documents"
summ q-qwen $Q /tmp/st/kd --chunk-tokens 1280
summ q-smol $S /tmp/st/kd --chunk-tokens 1280
echo "=== 2. 48 reports: warpfold"
summ b-qwen $Q /tmp/st/kb
summ b-qwen-8gib $Q /tmp/st/kb --vram-budget 8GiB
summ b-smol $S /tmp/st/kb
echo "=== 2. 48 reports: transformers"
$PY bench/gpu/peer_summarize.py $Q /tmp/st/kb "$OUT/b-peer.jsonl" --style detailed 2>"$OUT/b-peer.err" | tail -1
tail -3 "$OUT/b-peer.err"
$PY bench/gpu/peer_summarize.py $Q /tmp/st/kb "$OUT/b-peer-8gib.jsonl" --style detailed --memory-gib 8 2>"$OUT/b-peer-8gib.err" | tail -1
tail -3 "$OUT/b-peer-8gib.err"
echo "=== done"
