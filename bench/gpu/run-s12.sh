#!/usr/bin/env bash
# Session 12 (issue 17, the 7B's prefill fusions and the probe's throughput knee), on the GPU machine,
# after `bash bench/gpu/pack-s10.sh` here (the CUDA binary, the CUDA test binary, MiniLM in f16):
#
#   bash bench/gpu/run-s12.sh put      # append the carried stream part (one per call, in order, on a
#                                      # warm machine); after the last, check and unpack into /tmp/st
#   bash bench/gpu/run-s12.sh seven    # the 7B against the careful transformers baseline, its stage
#                                      # profile, and the probe choosing the bin (the knee)
#   bash bench/gpu/run-s12.sh minilm   # MiniLM's vectors against sentence-transformers' fixture, then
#                                      # end to end against sentence-transformers (batch 32 and 256) in
#                                      # bins of 16,384 and with the probe's bin
#
# The gated GPU tests (the new q/k/v split and residual + RMS norm kernels among them; decoder logits
# against transformers for the SmolLM2 and Qwen2.5-7B architectures) run from the CUDA test binary:
#   HF_MODELS="smollm2-135m qwen2.5-7b" bash bench/gpu/run-gpu-tests.sh
. "$(dirname "$0")/env.sh"
stage=${1:-put}
minilm_tests_stream s12 "$stage"
M=$M7
corpus() { corpus_ids "$@"; }
case $stage in
  seven)
    random_7b
    for c in ${CORPORA:-stress production}; do
      corpus $c
      score_7b_careful $M $c
    done
    [ -n "${CORPORA:-}" ] && exit 0  # CORPORA=stress: the scores only (a rerun after a cold first call)
    echo "--- the probe chooses the bin (throughput knee), stress"
    probe_7b_stress
    echo "--- stage profile, 64 stress documents, bins of 16,384"
    profile_7b 64 ;;
  minilm)
    check_minilm
    $W --device cuda --bin-tokens 16384 bench --documents 2048 --peer --peer-python "$PY" --peer-batch 32,256 --out "$OUT/gpu-minilm-s12.json"
    echo "--- the probe's bin (throughput knee), no peer"
    $W --device cuda bench --documents 2048 --packer-sequences 1000 --out "$OUT/gpu-minilm-s12-probed.json" 2>&1 | grep -E "VRAM probe|packed|end to end" ;;
esac
echo "=== done $stage"
