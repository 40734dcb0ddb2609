#!/usr/bin/env bash
# Session 13 (issues 17 and 18: the tree after the tidy on a GPU), on the GPU machine, after
# `GPU_DIR=DIR bash bench/gpu/pack-s10.sh` here (the CUDA binary, the CUDA test binary, MiniLM in f16):
#
#   bash bench/gpu/run-s13.sh put      # append the carried stream part (one per call, in order, on a
#                                      # warm machine); after the last, check and unpack into /tmp/st
#   bash bench/gpu/run-s13.sh seven    # the 7B (random weights, the real configuration) against the
#                                      # careful transformers baseline on the stress corpus; the probe
#                                      # with no knee to time; one bin's stage profile as tracing events
#   bash bench/gpu/run-s13.sh minilm   # MiniLM's vectors against sentence-transformers' fixture, then
#                                      # `warpfold bench` with the probe's bin (no --bin-tokens) against
#                                      # sentence-transformers at batch 32 and 256
#
# The gated GPU tests run from the CUDA test binary: HF_MODELS="smollm2-135m qwen2.5-7b" bash bench/gpu/run-gpu-tests.sh
. "$(dirname "$0")/env.sh"
stage=${1:-put}
opened() {
  unpack_minilm $ST/minilm-f16.tar.xz
  mkdir -p .gpu && cp $ST/candle-tests.xz .gpu/ 2>/dev/null
}
stream_stage s13 "$stage" opened
[ -x $W ] || { echo "no $W: the stream is not complete"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
M=/tmp/models/qwen2.5-7b
corpus() { # kind -> /tmp/KIND.jsonl, 256 documents, MiniLM's tokenizer ids
  [ -f /tmp/$1.jsonl ] || $W --model /tmp/wf-models/all-MiniLM-L6-v2 corpus --kind $1 --documents 256 > /tmp/$1.jsonl
}
case $stage in
  seven)
    [ -f $M/config.json ] || $PY bench/gpu/make_random_decoder.py qwen2.5-7b $M
    corpus stress
    score_7b_careful $M stress
    echo "--- the probe (its longest sequence is above what memory allows: nothing to time)"
    $W --device cuda score --decoder $M --json < /tmp/stress.jsonl > "$OUT/wf-7b-stress-probed.jsonl" 2> "$OUT/wf-7b-stress-probed.err"
    grep -E "VRAM probe" "$OUT/wf-7b-stress-probed.err"; tail -1 "$OUT/wf-7b-stress-probed.err"
    echo "--- stage profile, 16 stress documents, bins of 16,384 (events inside each bin's span)"
    head -16 /tmp/stress.jsonl > /tmp/stress16.jsonl
    WARPFOLD_PROFILE=1 $W --device cuda --bin-tokens 16384 score --decoder $M --json < /tmp/stress16.jsonl > /dev/null 2> "$OUT/profile-7b.err"
    grep "warpfold::profile" "$OUT/profile-7b.err" | tail -16 ;;
  minilm)
    check_minilm
    $W --device cuda bench --documents 2048 --peer --peer-python "$PY" --peer-batch 32,256 --out "$OUT/gpu-minilm-s13-probed.json" ;;
esac
echo "=== done $stage"
