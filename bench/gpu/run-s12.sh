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
# What this session's stream carries besides the binary: MiniLM, and the CUDA test binary where
# run-gpu-tests.sh looks for it.
opened() {
  unpack_minilm $ST/minilm-f16.tar.xz
  mkdir -p .gpu && cp $ST/candle-tests.xz .gpu/ 2>/dev/null
}
stream_stage s12 "$stage" opened
[ -x $W ] || { echo "no $W: the stream is not complete"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
M=/tmp/models/qwen2.5-7b
corpus() { # kind -> /tmp/KIND.jsonl, 256 documents, MiniLM's tokenizer ids
  [ -f /tmp/$1.jsonl ] || $W --model /tmp/wf-models/all-MiniLM-L6-v2 corpus --kind $1 --documents 256 > /tmp/$1.jsonl
}
case $stage in
  seven)
    [ -f $M/config.json ] || $PY bench/gpu/make_random_decoder.py qwen2.5-7b $M
    for c in ${CORPORA:-stress production}; do
      corpus $c
      score_7b_careful $M $c
    done
    [ -n "${CORPORA:-}" ] && exit 0  # CORPORA=stress: the scores only (a rerun after a cold first call)
    echo "--- the probe chooses the bin (throughput knee), stress"
    $W --device cuda score --decoder $M --json < /tmp/stress.jsonl > "$OUT/wf-7b-stress-probed.jsonl" 2> "$OUT/wf-7b-stress-probed.err"
    grep -E "VRAM probe" "$OUT/wf-7b-stress-probed.err"; tail -1 "$OUT/wf-7b-stress-probed.err"
    echo "--- stage profile, 64 stress documents, bins of 16,384"
    head -64 /tmp/stress.jsonl > /tmp/stress64.jsonl
    WARPFOLD_PROFILE=1 $W --device cuda --bin-tokens 16384 score --decoder $M --json < /tmp/stress64.jsonl > /dev/null 2> "$OUT/profile-7b.err"
    grep "^profile" "$OUT/profile-7b.err" | tail -16 ;;
  minilm)
    check_minilm
    $W --device cuda --bin-tokens 16384 bench --documents 2048 --peer --peer-python "$PY" --peer-batch 32,256 --out "$OUT/gpu-minilm-s12.json"
    echo "--- the probe's bin (throughput knee), no peer"
    $W --device cuda bench --documents 2048 --packer-sequences 1000 --out "$OUT/gpu-minilm-s12-probed.json" 2>&1 | grep -E "VRAM probe|packed|end to end" ;;
esac
echo "=== done $stage"
