#!/usr/bin/env bash
# One call on the GPU machine for the decoder side of issue 4 and the GPU check of issue 6: the gated
# CUDA tests (with transformers' reference logits), then — only if they pass — the 7B stage profile
# and the decoder benchmark against transformers (run-decoders.sh: Qwen2.5-7B and SmolLM2-360M
# architectures, same ids, plus the 8 GiB memory-cap case). Carry .gpu (warpfold.xz,
# candle-tests.xz, meta.tar.xz, run-on-gpu-machine.sh).
. "$(dirname "$0")/env.sh"
export OUT
HF_MODELS="smollm2-135m qwen2.5-7b" bash bench/gpu/run-gpu-tests.sh 2>&1 | grep -v "Loading weights\|Writing model shards"
grep -q "gpu tests exit 0" "$OUT/gpu-tests.log" || { echo "GPU tests failed: no benchmark"; exit 1; }
BINS=16384 bash bench/gpu/run-profile-7b.sh
MODELS="qwen2.5-7b smollm2-360m" bash bench/gpu/run-decoders.sh 2>&1 | grep -v "Loading weights\|Writing model shards" | tail -60
# The device tool returns only a few files: one summary, the logs, the rest in one archive.
$PY bench/gpu/collect.py "$OUT"
(cd "$OUT" && tar -cJf raw.tar.xz --remove-files wf-* hf-* run-decoders.log 2>/dev/null; ls)
