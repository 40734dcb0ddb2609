#!/usr/bin/env bash
# all-mpnet-base-v2's architecture on the GPU, with random f16 weights made here (its 438 MB cannot be
# carried at 64 MiB a call; its config, tokenizer and sentence-transformers files come in
# .gpu/mpnet-meta.tar.xz, which bench/gpu/pack-mpnet.sh writes beside the CUDA binary): `warpfold bench`
# with sentence-transformers as the peer on the same weights and texts, batch 32 and 256 (it sorts by
# length): both rates, packed against padded, and the smallest cosine between the peer's vectors and
# warpfold's. Random weights are honest for speed and for agreement; the real weights' agreement is
# checked on the CPU (crates/candle/tests/mpnet.rs).
#
#   bash bench/gpu/run-mpnet.sh      # from the repository root on the GPU machine, .gpu carried
. "$(dirname "$0")/env.sh"
log_to mpnet-gpu.log
host_info
need_warpfold
M=/tmp/wf-models/all-mpnet-base-v2-random
if [ ! -f $M/model.safetensors ]; then
  mkdir -p /tmp/mpnet-meta && xz -dc .gpu/mpnet-meta.tar.xz | tar -C /tmp/mpnet-meta -xf -
  $PY bench/gpu/make_random_encoder.py /tmp/mpnet-meta/all-mpnet-base-v2 $M
fi
$W --model $M --device cuda bench --documents 2048 --peer --peer-python "$PY" --peer-batch 32,256 --rounds 3 \
  --out "$OUT/gpu-mpnet-2048.json"
echo "=== done"
