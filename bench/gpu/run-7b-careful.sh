#!/usr/bin/env bash
# Issues 17 and 18: the Qwen2.5-7B architecture against a careful transformers user, the gated GPU
# tests and MiniLM with the probe's bin, on the GPU machine, after
# `GPU_DIR=DIR bash bench/gpu/pack-minilm-tests.sh` here (the CUDA binary,
# the CUDA test binary, MiniLM in f16):
#
#   bash bench/gpu/run-7b-careful.sh put      # append the carried stream part (one per call, in order, on a
#                                      # warm machine); after the last, check and unpack into /tmp/st
#   bash bench/gpu/run-7b-careful.sh seven    # the 7B (random weights, the real configuration) against the
#                                      # careful transformers baseline on the stress and production
#                                      # corpora; the probe with no knee to time; one bin's stage
#                                      # profile as tracing events
#   bash bench/gpu/run-7b-careful.sh tests    # the gated GPU tests (kernels against candle's CPU ops, the
#                                      # decoders' logits against transformers, FA-2, paged decode)
#   bash bench/gpu/run-7b-careful.sh minilm   # MiniLM's vectors against sentence-transformers' fixture, then
#                                      # `warpfold bench` with the probe's bin (no --bin-tokens) against
#                                      # sentence-transformers at batch 32 and 256
. "$(dirname "$0")/env.sh"
stage=${1:-put}
minilm_tests_stream ${TAG:-7b-careful} "$stage"
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
    $W --device cuda bench --documents 2048 --peer --peer-python "$PY" --peer-batch 32,256 --out "$OUT/gpu-minilm-probed.json" ;;
esac
echo "=== done $stage"
