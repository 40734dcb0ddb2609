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
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
stage=${1:-put}
exec > >(tee "$OUT/s12-$stage.log") 2>&1
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib WARPFOLD_MODELS_DIR=/tmp/wf-models WARPFOLD_LOG=${WARPFOLD_LOG:-warn}
PY=/opt/torch/.venv/bin/python
[ -x $PY ] || PY=python3
W=/tmp/warpfold
ST=/tmp/st
bash bench/gpu/stream.sh put || exit 1
if [ ! -f $ST/.opened ] && [ "$(wc -l < /tmp/stream.parts)" = "$(cat .gpu-extra/stream/PARTS)" ]; then
  bash bench/gpu/stream.sh open $ST && touch $ST/.opened
  mkdir -p /tmp/wf-models && xz -dc $ST/minilm-f16.tar.xz | tar -C /tmp/wf-models -xf -
  mkdir -p .gpu && cp $ST/candle-tests.xz .gpu/ 2>/dev/null
  bash $ST/run-on-gpu-machine.sh $ST/warpfold.xz --version
fi
[ "$stage" = put ] && exit 0
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
      $W --device cuda --bin-tokens 16384 score --decoder $M --json < /tmp/$c.jsonl > "$OUT/wf-7b-$c.jsonl" 2> /tmp/wf-7b-$c.err
      tail -1 /tmp/wf-7b-$c.err | tee "$OUT/wf-7b-$c.report.json"
      $PY bench/gpu/hf_score.py --model $M --ids /tmp/$c.jsonl --attn sdpa --token-budget 16384 --out-dir /tmp | tee "$OUT/hf-7b-$c-careful.json"
      $PY - "$OUT/wf-7b-$c.jsonl" /tmp/hf-scores-sdpa-budget16384.jsonl "$OUT/wf-7b-$c.report.json" "$OUT/hf-7b-$c-careful.json" <<'PY' | tee -a "$OUT/checks.jsonl"
import json, sys
ours = [json.loads(l) for l in open(sys.argv[1])]
theirs = [json.loads(l) for l in open(sys.argv[2])]
d = [abs(a["mean_log_likelihood"] - b["mean_log_likelihood"]) for a, b in zip(ours, theirs)]
wf, hf = json.load(open(sys.argv[3])), json.load(open(sys.argv[4]))
rate = lambda r: r.get("tokens_per_second") or r.get("real_tokens_per_second")
print(json.dumps({"check": sys.argv[1].split("/")[-1], "documents": len(d), "max_abs_diff_mean_ll": max(d), "ok": len(d) == len(ours) and max(d) <= 0.05,
                  "warpfold_tokens_per_second": rate(wf), "careful_transformers_tokens_per_second": rate(hf), "ratio": rate(wf) / rate(hf)}))
PY
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
    $PY -c "import json; [print(json.dumps({'text': i['text']})) for i in json.load(open('tests/fixtures/minilm_reference.json'))['items']]" \
      | $W --device cuda embed > "$OUT/minilm-fixture.jsonl"
    $PY bench/gpu/check.py minilm tests/fixtures/minilm_reference.json "$OUT/minilm-fixture.jsonl" | tee -a "$OUT/checks.jsonl"
    $W --device cuda --bin-tokens 16384 bench --documents 2048 --peer --peer-python "$PY" --peer-batch 32,256 --out "$OUT/gpu-minilm-s12.json"
    echo "--- the probe's bin (throughput knee), no peer"
    $W --device cuda bench --documents 2048 --packer-sequences 1000 --out "$OUT/gpu-minilm-s12-probed.json" 2>&1 | grep -E "VRAM probe|packed|end to end" ;;
esac
echo "=== done $stage"
