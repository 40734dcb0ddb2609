#!/usr/bin/env bash
# The GPU run, in one call on the GPU machine (see scripts/gpu/build-cuda.sh and pack-models.sh, which
# put warpfold.xz, run-on-gpu-machine.sh and minilm-f16.tar.xz in .gpu/):
#   1. environment: GPU, driver, PyTorch / transformers / sentence-transformers versions;
#   2. correctness on the GPU: the decoder (FlashAttention-2 varlen, causal, bf16) on the tiny
#      transformers reference checkpoints; MiniLM (FA-2 varlen, non-causal, f16) against
#      sentence-transformers' vectors of the 24 fixture texts;
#   3. speed: `warpfold bench --device cuda` (packed vs padded on the same ids, stress and production
#      corpora), with sentence-transformers on the same GPU as the peer when it is installed.
# Results land in $OUT (the device tool brings them back).
. "$(dirname "$0")/env.sh"
log_to run-device.log
nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader
py_versions torch transformers
if $PY -c "import sentence_transformers as s; print('sentence-transformers', s.__version__)"; then PEER=(--peer --peer-python "$PY"); else PEER=(); echo "no sentence-transformers: no peer run"; fi

unpack_warpfold
[ -f /tmp/wf-models/all-MiniLM-L6-v2/model.safetensors ] || bash bench/gpu/prepare-device.sh

echo "=== JIT warm-up (first CUDA ops on a fresh machine compile candle's PTX)"
t=$(date +%s); echo '{"text": "warm up"}' | $W --device cuda embed > /dev/null; echo "warm-up $(( $(date +%s) - t )) s"

echo "=== decoder on the GPU vs transformers (tiny reference checkpoints)"
for m in qwen2 llama3; do check_decoder $m; done

echo "=== MiniLM on the GPU vs sentence-transformers (fixture vectors)"
check_minilm

echo "=== VRAM probe: MiniLM, whole card and under an 8 GiB budget"
echo '{"text": "probe"}' | $W --device cuda embed > /dev/null
echo '{"text": "probe"}' | $W --device cuda --vram-budget 8GiB embed > /dev/null

echo "=== MiniLM speed: packed vs padded (and the peer), same ids"
$W --device cuda --bin-tokens 16384 bench --documents 2048 --packer-sequences 100000 "${PEER[@]}" --out "$OUT/gpu-minilm.json"
echo "=== done"
