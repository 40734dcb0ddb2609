#!/usr/bin/env bash
# Issue 15.4/15.5: the drop-to-summary path with the real weights on the GPU, against the
# pipeline a user would assemble with transformers, now that the default chunk follows the model and
# the device (whole reports up to 8,192 tokens for the 1.5B model on a GPU). Runs on the machine the
# stream (bench/gpu/pack-app-summaries.sh, then bench/gpu/stream.sh put over consecutive calls) set up in /tmp/st.
#   1. the documents of tests/summary_quality.rs (/tmp/st/kd) with both default chat models at the
#      test's chunk of 1,280 (loops; key facts scored on the build machine);
#   2. 48 reports of 400-6,000 words (/tmp/st/kb): warpfold with the 1.5B model at its default chunk,
#      on the whole GPU and under --vram-budget 8GiB; the transformers peer (peer_summarize.py: the
#      same GGUF, whole documents, length-sorted batches under a padded-token budget, the same
#      prompts and decoding) uncapped and capped at 8 GiB; SmolLM2 with warpfold;
#   3. nvidia-smi sampled every 100 ms through each run (GPU busy, memory).
. "$(dirname "$0")/env.sh"
log_to run-summarize-reports-${1:-ours}.log
need_warpfold $ST | tail -1
sha256sum $Q $S
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
gguf_peer
sample() { nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader,nounits -lms 100 > "$OUT/$1.smi" & echo $!; }
summ() { # label decoder folder extra...
  local label=$1 dec=$2 dir=$3; shift 3
  echo "--- warpfold $label"
  local s; s=$(sample "$label")
  /usr/bin/time -f "wall %e s, max RSS %M KiB" $W --device cuda summarize "$dir" --decoder "$dec" --json "$@" > "$OUT/$label.jsonl" 2> "$OUT/$label.err"
  kill "$s"
  tail -3 "$OUT/$label.err"
}
peer() { # label extra...
  local label=$1; shift
  echo "--- transformers $label"
  local s; s=$(sample "$label")
  $PY bench/gpu/peer_summarize.py $Q /tmp/st/kb "$OUT/$label.jsonl" --style detailed "$@" > "$OUT/$label.json" 2> "$OUT/$label.err"
  kill "$s"
  cat "$OUT/$label.json"; tail -2 "$OUT/$label.err"
}
# What to run, so that each call stays under the 10-minute limit: ours | peer | variants.
case "${1:-ours}" in
  ours)
    echo "=== 1. the quality documents"
    summ_quality
    echo "=== 2. 48 reports, warpfold"
    summ_reports ;;
  peer)
    echo "=== 2. 48 reports, transformers"
    peer b-peer
    peer b-peer-8gib --memory-gib 8 ;;
  variants)
    # Prompt wordings under trial on the build machine (WFX, a temporary switch of this build's
    # crates/summarize; unset, the defaults run): the quality documents and the 48 reports.
    summ_quality
    for v in a b c d e; do WFX=$v summ q-qwen-wfx-$v $Q /tmp/st/kd --chunk-tokens 1280; done
    for v in a c; do WFX=$v summ b-qwen-wfx-$v $Q /tmp/st/kb; done ;;
esac
echo "=== done"
