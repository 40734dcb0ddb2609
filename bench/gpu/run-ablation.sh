#!/usr/bin/env bash
# The padded ablation of the decoder benchmark: the same warpfold, same kernels and same ids as
# run-decoders.sh, but batched as transformers batches (`--batching padded --batch-size 8`: arrival
# order, padded to the longest), so that the gap between packed and padded is the packing alone.
. "$(dirname "$0")/env.sh"
need_warpfold > /dev/null
corpus_model
for c in stress production; do $W --model /tmp/corpus-model corpus --kind $c --documents 256 > /tmp/$c.jsonl; done
for m in ${MODELS:-smollm2-360m qwen2.5-7b}; do
  [ -f /tmp/models/$m/config.json ] || $PY bench/gpu/make_random_decoder.py $m /tmp/models/$m 2>&1 | grep -v "Writing model shards"
  # Warm-up: the first CUDA process on a fresh machine spends ~17 s compiling candle's PTX.
  head -1 /tmp/stress.jsonl | timeout 200 $W --device cuda --batching padded score --decoder /tmp/models/$m > /dev/null 2>&1
  for c in stress production; do
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > /tmp/smi.csv & smi=$!
    timeout 200 $W --device cuda --batching padded --batch-size 8 score --decoder /tmp/models/$m --json < /tmp/$c.jsonl > /dev/null 2> /tmp/err
    kill $smi
    echo "{\"run\": \"warpfold padded (batch 8) $m $c\", \"report\": $(tail -1 /tmp/err), \"nvidia_smi_peak_mib\": $(sort -n /tmp/smi.csv | tail -1)}" | tee -a "$OUT/ablation.jsonl"
  done
done
