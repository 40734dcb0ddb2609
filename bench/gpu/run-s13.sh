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
minilm_tests_stream s13 "$stage"
case $stage in
  seven)
    random_7b
    corpus_ids stress
    score_7b_careful $M7 stress
    echo "--- the probe (its longest sequence is above what memory allows: nothing to time)"
    probe_7b_stress
    echo "--- stage profile, 16 stress documents, bins of 16,384 (events inside each bin's span)"
    profile_7b 16 ;;
  minilm)
    check_minilm
    $W --device cuda bench --documents 2048 --peer --peer-python "$PY" --peer-batch 32,256 --out "$OUT/gpu-minilm-s13-probed.json" ;;
esac
echo "=== done $stage"
