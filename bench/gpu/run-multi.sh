#!/usr/bin/env bash
# Several GPUs in one process (issue 7), in one call on a machine with two or more GPUs
# (nvidia-h200-x2), after scripts/gpu/build-cuda.sh and scripts/gpu/pack-models.sh (which put
# warpfold.xz, run-on-gpu-machine.sh and minilm-f16.tar.xz in .gpu/; carry .gpu):
#   1. all-MiniLM-L6-v2 (real weights): `bench --devices-compare`, GPU 0 alone then GPUs 0 and 1 in
#      one engine, same ids, stress and production corpora; each GPU runs its own VRAM probe;
#   2. the SmolLM2-360M architecture (random bf16 weights, generated here) likewise, scoring the
#      corpus's documents in windows;
#   3. both again with GPU 1 made to fail every bin after its first $FAIL_AFTER
#      (WARPFOLD_FAIL_DEVICE=1:after_bins=N): every sequence answered once, equal to the one-GPU
#      answers, none lost or run twice, GPU 1 taken out.
# Results in $OUT: multi-*.json (the bench reports: per run tokens/s, per-device bins, tokens, busy
# seconds, failures, steals; the scaling ratio; the check), checks.jsonl (one line per corpus and
# run), smi-multi.csv (per-GPU utilization every 200 ms), run-multi.log. Under 10 minutes.
. "$(dirname "$0")/env.sh"
log_to run-multi.log
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
gpus=$(nvidia-smi -L | wc -l)
[ "$gpus" -ge 2 ] || { echo "run-multi: needs two or more GPUs, found $gpus"; exit 1; }
DEVICES=${DEVICES:-cuda:0,cuda:1}
FAIL_AFTER=${FAIL_AFTER:-10}
MINILM_DOCS=${MINILM_DOCS:-4096}
DECODER_DOCS=${DECODER_DOCS:-1024}
# Bins of 32k tokens give the decoder ~40 bins per corpus to spread (the probe would allow 65k).
DECODER_BIN=${DECODER_BIN:-32768}

unpack_warpfold
MODELS=${PREP_MODELS:-smollm2-360m} bash bench/gpu/prepare-device.sh
# MINILM_MODEL: a model folder for the encoder runs (e.g. /tmp/wf-models/minilm-random, MiniLM's
# architecture with random weights, when the real ones are not carried); default: the default model.
minilm=(); [ -n "${MINILM_MODEL:-}" ] && minilm=(--model "$MINILM_MODEL")

echo "=== JIT warm-up (first CUDA ops on a fresh machine compile candle's PTX), each GPU"
for d in ${DEVICES//,/ }; do
  t=$(date +%s); echo '{"text": "warm up"}' | $W "${minilm[@]}" --device "$d" --bin-tokens 1024 embed > /dev/null; echo "$d: $(( $(date +%s) - t )) s"
done

nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used --format=csv,noheader,nounits -lms 200 > "$OUT/smi-multi.csv" &
smi=$!
compare() { # name, timeout, then warpfold arguments
  local name=$1 limit=$2; shift 2
  echo "=== $name: $*"
  local t=$(date +%s)
  timeout "$limit" $W --device "$DEVICES" "$@" --out "$OUT/multi-$name.json" > /dev/null
  echo "$name: exit $? in $(( $(date +%s) - t )) s"
}
compare minilm 150 "${minilm[@]}" bench --devices-compare --documents "$MINILM_DOCS"
compare smollm2 200 "${minilm[@]}" --bin-tokens "$DECODER_BIN" bench --devices-compare --decoder /tmp/models/smollm2-360m --documents "$DECODER_DOCS"
export WARPFOLD_FAIL_DEVICE=1:after_bins=$FAIL_AFTER
compare minilm-fail 100 "${minilm[@]}" bench --devices-compare --corpus stress --documents "$MINILM_DOCS"
compare smollm2-fail 120 "${minilm[@]}" --bin-tokens "$DECODER_BIN" bench --devices-compare --corpus stress --decoder /tmp/models/smollm2-360m --documents "$DECODER_DOCS"
unset WARPFOLD_FAIL_DEVICE
kill $smi

echo "=== summary"
$PY - "$OUT" <<'PYEOF' | tee -a "$OUT/checks.jsonl"
import json, os, sys
out = sys.argv[1]
for name in ["minilm", "smollm2", "minilm-fail", "smollm2-fail"]:
    path = os.path.join(out, f"multi-{name}.json")
    if not os.path.exists(path):
        print(json.dumps({"check": f"multi-{name}", "ok": False, "why": "no report (failed or timed out)"}))
        continue
    r = json.load(open(path))
    for c in r["corpora"]:
        one, all_ = c["one_device"], c["all_devices"]
        print(json.dumps({
            "check": f"multi-{name} {c['corpus']}", "model": r["model"], "fail_device": r["fail_device"],
            "sequences": c["sequences"], "real_tokens": c["real_tokens"],
            "one_gpu_tokens_per_s": round(one["tokens_per_second"]), "all_gpus_tokens_per_s": round(all_["tokens_per_second"]),
            "scaling": round(c["scaling"], 3),
            "bins_per_gpu": [d["bins"] for d in all_["per_device"]],
            "busy_s_per_gpu": [round(d["busy_seconds"], 2) for d in all_["per_device"]],
            "failures_per_gpu": [d["failures"] for d in all_["per_device"]],
            "taken_out": c["check"]["devices_taken_out"], "lost": c["check"]["lost"], "ran_twice": c["check"]["ran_twice"],
            "errors": c["check"]["errors"], "max_abs_diff": c["check"]["max_abs_diff_vs_one_device"],
            "ok": c["check"]["ok"] and (r["fail_device"] is None or len(c["check"]["devices_taken_out"]) == 1),
        }))
PYEOF
echo "GPU utilization (index: mean % over the samples where any GPU was busy):"
$PY - "$OUT/smi-multi.csv" <<'PYEOF'
import sys, collections
u = collections.defaultdict(list)
for line in open(sys.argv[1]):
    parts = [p.strip() for p in line.split(",")]
    if len(parts) == 4 and parts[2].isdigit():
        u[parts[1]].append(int(parts[2]))
for gpu, xs in sorted(u.items()):
    busy = [x for x in xs if x > 0]
    print(f"  GPU {gpu}: {len(xs)} samples, {len(busy)} busy, mean {sum(busy) / max(len(busy), 1):.0f}% when busy")
PYEOF
echo "=== done"
