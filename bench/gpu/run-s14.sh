#!/usr/bin/env bash
# Sessions 13 and 14 (issues 17 and 18: the tree after the tidy on a GPU, and the decoder's
# memory-bound kernels reading and writing 16-byte packs; session 13 wrote this script and could not
# run it), on the GPU machine, after `GPU_DIR=DIR bash bench/gpu/pack-s10.sh` here (the CUDA binary,
# the CUDA test binary, MiniLM in f16):
#
#   bash bench/gpu/run-s14.sh put      # append the carried stream part (one per call, in order, on a
#                                      # warm machine); after the last, check and unpack into /tmp/st
#   bash bench/gpu/run-s14.sh seven    # the 7B (random weights, the real configuration) against the
#                                      # careful transformers baseline on the stress and production
#                                      # corpora; the probe with no knee to time; one bin's stage
#                                      # profile as tracing events
#   bash bench/gpu/run-s14.sh tests    # the gated GPU tests (kernels against candle's CPU ops, the
#                                      # decoders' logits against transformers, FA-2, paged decode)
#   bash bench/gpu/run-s14.sh minilm   # MiniLM's vectors against sentence-transformers' fixture, then
#                                      # `warpfold bench` with the probe's bin (no --bin-tokens) against
#                                      # sentence-transformers at batch 32 and 256
. "$(dirname "$0")/env.sh"
stage=${1:-put}
minilm_tests_stream s14 "$stage"
case $stage in
  seven)
    random_7b
    for c in stress production; do
      corpus_ids $c
      score_7b_careful $M7 $c
    done
    echo "--- the probe (its longest sequence is above what memory allows: nothing to time)"
    probe_7b_stress
    echo "--- stage profile, 64 stress documents, bins of 16,384 (events inside each bin's span)"
    profile_7b 64 ;;
  tests)
    HF_MODELS="smollm2-135m qwen2.5-7b" bash bench/gpu/run-gpu-tests.sh ;;
  minilm)
    check_minilm
    $W --device cuda bench --documents 2048 --peer --peer-python "$PY" --peer-batch 32,256 --out "$OUT/gpu-minilm-s14-probed.json" ;;
esac
echo "=== done $stage"
