#!/usr/bin/env bash
# The decoder benchmark, in one call on the GPU machine after bench/gpu/run-device.sh (which unpacks
# the binary): random-weight Qwen2.5-7B and SmolLM2-360M architectures generated here, the same
# token ids (the stress and production corpora) scored by transformers (padded batches of 8, sdpa and
# flash_attention_2 when importable) and by warpfold (packed, FlashAttention-2 varlen), then the
# memory-cap case: a corpus holding a 1M-token document under an 8 GiB budget.
. "$(dirname "$0")/env.sh"
log_to run-decoders.log
need_warpfold
ATTNS="sdpa"
$PY -c "import flash_attn" 2>/dev/null && ATTNS="sdpa flash_attention_2"
echo "attention implementations for transformers: $ATTNS"
# The corpus's ids come from MiniLM's tokenizer (carried in .gpu/meta.tar.xz, no weights needed).
corpus_model
C="$W --model /tmp/corpus-model"
$C corpus --kind stress --documents 256 > /tmp/stress.jsonl
$C corpus --kind production --documents 256 > /tmp/production.jsonl

# Peak GPU memory of a command as nvidia-smi sees it (whole process: weights, activations, allocator
# pools, CUDA context), sampled every 100 ms, the same measure for every system.
smi_start() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > "/tmp/smi-$1.csv" & SMI=$!; }
smi_peak() { kill $SMI; wait $SMI 2>/dev/null; echo "  nvidia-smi peak memory used (MiB): $(sort -n "/tmp/smi-$1.csv" | tail -1)"; }
score() { # model corpus [name suffix] [extra warpfold args]
  local m=$1 c=$2 tag=${3:-} extra=${4:-${WF_ARGS:-}}
  smi_start "wf-$m-$c$tag"
  timeout ${WF_TIMEOUT:-300} $W --device cuda $extra score --decoder /tmp/models/$m --json < /tmp/$c.jsonl > "$OUT/wf-$m-$c$tag.jsonl" 2> "/tmp/wf-$m-$c$tag.err"
  smi_peak "wf-$m-$c$tag"
  tail -1 "/tmp/wf-$m-$c$tag.err" > "$OUT/wf-$m-$c$tag.report.json"; grep -v '^{' "/tmp/wf-$m-$c$tag.err" | tail -3
  echo "warpfold $m $c$tag ($extra): $(cat "$OUT/wf-$m-$c$tag.report.json")"
}
# MODELS and WF_ARGS (e.g. "--bin-tokens 32768") may be set by the caller.
for m in ${MODELS:-smollm2-360m qwen2.5-7b}; do
  [ -f /tmp/models/$m/config.json ] || $PY bench/gpu/make_random_decoder.py $m /tmp/models/$m
  for c in stress production; do
    score $m $c
    # Bins of 16,384 tokens: past that a 7B runs no faster (16k/32k/64k measured equal) and holds
    # more activation memory.
    [ $m = qwen2.5-7b ] && score $m $c -16k "--bin-tokens 16384"
    for a in $ATTNS; do
      smi_start "hf-$m-$c-$a"
      $PY bench/gpu/hf_score.py --model /tmp/models/$m --ids /tmp/$c.jsonl --attn $a --out-dir /tmp > "$OUT/hf-$m-$c-$a.json" || echo "hf $m $c $a failed"
      smi_peak "hf-$m-$c-$a"
      echo "hf $m $c $a: $(cat "$OUT/hf-$m-$c-$a.json")"
      $PY - "$OUT/wf-$m-$c.jsonl" "/tmp/hf-scores-$a.jsonl" <<'PYEOF' | tee -a "$OUT/checks.jsonl"
import json, sys
ours = [json.loads(l) for l in open(sys.argv[1])]
theirs = [json.loads(l) for l in open(sys.argv[2])]
d = [abs(a["mean_log_likelihood"] - b["mean_log_likelihood"]) for a, b in zip(ours, theirs)]
print(json.dumps({"check": sys.argv[1].split("/")[-1] + " vs " + sys.argv[2].split("/")[-1], "documents": len(d),
                  "max_abs_diff_mean_ll": max(d), "mean_abs_diff": sum(d) / len(d), "ok": len(d) == len(ours) and max(d) <= 0.05}))
PYEOF
    done
  done
done

[ -n "${SKIP_CAP:-}" ] && exit 0
echo "=== memory cap: 8 GiB, stress corpus + one 1,000,000-token document, SmolLM2-360M architecture"
$C corpus --kind stress --documents 64 --long-document-tokens 1000000 > /tmp/capped.jsonl
$W --device cuda --vram-budget 8GiB score --decoder /tmp/models/smollm2-360m --json < /tmp/capped.jsonl > "$OUT/wf-capped.jsonl" 2> /tmp/wf-capped.err
echo "warpfold exit $?: $(tail -1 /tmp/wf-capped.err)"; tail -1 /tmp/wf-capped.err > "$OUT/wf-capped.report.json"; grep -i "probe\|error" /tmp/wf-capped.err | head -5
frac=$($PY -c "import torch; print(8 * 2**30 / torch.cuda.get_device_properties(0).total_memory)")
$PY bench/gpu/hf_score.py --model /tmp/models/smollm2-360m --ids /tmp/capped.jsonl --attn sdpa --out-dir /tmp --memory-fraction "$frac" > "$OUT/hf-capped.json"
echo "hf capped exit $?: $(cat "$OUT/hf-capped.json")"
echo "=== done"
