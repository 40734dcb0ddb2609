#!/usr/bin/env bash
# The gated CUDA tests, on the GPU machine: transformers writes reference logits for random-weight
# decoders of real architectures (bench/gpu/hf_logits.py), then the flash-attn test binary packed by
# scripts/gpu/build-cuda-tests.sh (.gpu/candle-tests.xz) runs every `gpu_` test with --ignored:
# FA-2 varlen against a plain f32 attention, packed = alone on the GPU, out-of-memory split and
# retry through the engine, the decoder's prefill and decode logits against transformers.
#
#   HF_MODELS="smollm2-135m qwen2.5-7b" bash bench/gpu/run-gpu-tests.sh     # log in $OUT/gpu-tests.log
. "$(dirname "$0")/env.sh"
refs=""
for m in ${HF_MODELS:-smollm2-135m qwen2.5-7b}; do
  [ -f /tmp/models/$m/config.json ] || $PY bench/gpu/make_random_decoder.py $m /tmp/models/$m
  [ -f /tmp/models/$m-reference.safetensors ] || $PY bench/gpu/hf_logits.py /tmp/models/$m 2>&1 | grep -v "Loading weights" | tee -a "$OUT/gpu-tests.log"
  refs="$refs/tmp/models/$m:"
done
xz -dc .gpu/candle-tests.xz > /tmp/candle-tests && chmod +x /tmp/candle-tests
WARPFOLD_HF_REFERENCE=$refs timeout ${TEST_TIMEOUT:-300} /tmp/candle-tests --ignored gpu_ --test-threads 1 --nocapture 2>&1 | tee -a "$OUT/gpu-tests.log"
echo "gpu tests exit ${PIPESTATUS[0]}" | tee -a "$OUT/gpu-tests.log"
