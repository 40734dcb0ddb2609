#!/usr/bin/env bash
# Summarization on the GPU (issue 6), in one call on the GPU machine, after scripts/gpu/build-cuda.sh
# and scripts/gpu/pack-models.sh (warpfold.xz and run-on-gpu-machine.sh in .gpu/); carry .gpu and
# models/SmolLM2-135M-Instruct (the pinned GGUF, from `warpfold models fetch`).
#   1. the gated test, when its binary was built and packed as .gpu/smollm2-test
#      (cargo test --release --features flash-attn -p warpfold-summarize --test smollm2 --no-run):
#      CUDA logits against the CPU's, batched greedy against alone;
#   2. `warpfold --device cuda bench-summarize`: the sample documents packed and batched against one
#      document at a time, same process; and a larger run (the samples copied $COPIES times) where
#      batching has more to fill.
# Results in $OUT: summarize-gpu-*.json (the bench reports), run-summarize.log. Under 10 minutes.
. "$(dirname "$0")/env.sh"
log_to run-summarize.log
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
unpack_warpfold
# The pinned GGUF is carried in the checkout's models/, not in /tmp/wf-models.
export WARPFOLD_MODELS_DIR=$PWD/models
# DECODER: a chat model folder to use instead of the pinned GGUF (which, at 98 MB, cannot be carried
# next to the binary): DECODER=random generates SmolLM2-135M's architecture with random bf16
# weights here, with the GGUF's own tokenizer and chat template (scripts/gpu/pack-small.sh).
decoder=()
if [ "${DECODER:-}" = random ]; then
  MODELS=smollm2-135m bash bench/gpu/prepare-device.sh
  decoder=(--decoder /tmp/models/smollm2-135m)
elif [ -n "${DECODER:-}" ]; then
  decoder=(--decoder "$DECODER")
else
  [ -f models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf ] || { echo "carry models/SmolLM2-135M-Instruct or set DECODER"; exit 1; }
fi

if [ -x .gpu/smollm2-test ]; then
  echo "=== gated GPU test"
  (cd crates/summarize && ../../.gpu/smollm2-test --ignored --nocapture gpu_ 2>&1 | tail -20)
fi

echo "=== bench-summarize on the samples"
$W --device cuda bench-summarize "${decoder[@]}" --out "$OUT/summarize-gpu-samples.json" > /dev/null

COPIES=${COPIES:-16}
echo "=== bench-summarize on the samples x $COPIES"
rm -rf /tmp/sum-docs && mkdir -p /tmp/sum-docs/src && $W make-samples /tmp/sum-docs/src > /dev/null
for i in $(seq 1 "$COPIES"); do mkdir -p /tmp/sum-docs/c$i && cp -r /tmp/sum-docs/src/. /tmp/sum-docs/c$i/; done
rm -rf /tmp/sum-docs/src
$W --device cuda bench-summarize "${decoder[@]}" /tmp/sum-docs --max-batch 64 --out "$OUT/summarize-gpu-x$COPIES.json" > /dev/null
