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
. "$(dirname "$0")/env.sh"
log_to run-summarize-s7.log
sha256sum $Q $S
gguf_peer
summ() { # label decoder folder extra...
  local label=$1 dec=$2 dir=$3; shift 3
  echo "--- warpfold $label"
  /usr/bin/time -f "wall %e s, max RSS %M KiB" $W --device cuda summarize "$dir" --decoder "$dec" --json "$@" > "$OUT/$label.jsonl" 2> "$OUT/$label.err"
  tail -2 "$OUT/$label.err"
}
echo "=== 1. the quality documents"
summ_quality
echo "=== 2. 48 reports: warpfold"
summ_reports
echo "=== 2. 48 reports: transformers"
$PY bench/gpu/peer_summarize.py $Q /tmp/st/kb "$OUT/b-peer.jsonl" --style detailed 2>"$OUT/b-peer.err" | tail -1
tail -3 "$OUT/b-peer.err"
$PY bench/gpu/peer_summarize.py $Q /tmp/st/kb "$OUT/b-peer-8gib.jsonl" --style detailed --memory-gib 8 2>"$OUT/b-peer-8gib.err" | tail -1
tail -3 "$OUT/b-peer-8gib.err"
echo "=== done"
