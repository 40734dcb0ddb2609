#!/usr/bin/env bash
# Session 10 (issue 17, the embedding model on the GPU), on the GPU machine:
#
#   bash bench/gpu/run-s10.sh put      # append the carried stream part (one per call, in order, on a
#                                      # warm machine); after the last, check and unpack into /tmp/st
#   bash bench/gpu/run-s10.sh minilm   # everything below, in one call
#   bash bench/gpu/run-s10.sh paged    # only the paged-decode GPU test, with its whole output
#   bash bench/gpu/run-s10.sh seven    # the 7B architecture against the careful transformers baseline
#
# 1. all-MiniLM-L6-v2 (real weights, f16) against sentence-transformers' vectors of the fixture texts,
#    through the fused encoder kernels (bench/gpu/check.py, min cosine >= 0.999);
# 2. the gated GPU tests of warpfold-candle (`--ignored gpu_`), the encoder kernels' among them;
# 3. where a bin's time goes (`WARPFOLD_PROFILE=1`) with the fused kernels and with candle's ops
#    (`WARPFOLD_ENCODER_KERNELS=candle`), stress corpus, bins of 16,384 tokens;
# 4. `warpfold bench --peer --peer-batch 32,256` (packed, padded, end to end, sentence-transformers at
#    its default batch and at 256, all on the same texts in one run), then the same engine with
#    candle's ops and no peer, and bins of 8,192 / 32,768 tokens: model time against bin size.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
stage=${1:-put}
exec > >(tee "$OUT/s10-$stage.log") 2>&1
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib WARPFOLD_MODELS_DIR=/tmp/wf-models WARPFOLD_LOG=${WARPFOLD_LOG:-warn}
PY=/opt/torch/.venv/bin/python
[ -x $PY ] || PY=python3
W=/tmp/warpfold
ST=/tmp/st
bash bench/gpu/stream.sh put || exit 1
if [ ! -f $ST/.opened ] && [ "$(wc -l < /tmp/stream.parts)" = "$(cat .gpu-extra/stream/PARTS)" ]; then
  bash bench/gpu/stream.sh open $ST && touch $ST/.opened
  mkdir -p /tmp/wf-models && xz -dc $ST/minilm-f16.tar.xz | tar -C /tmp/wf-models -xf -
  [ -f $ST/candle-tests.xz ] && xz -dc $ST/candle-tests.xz > /tmp/candle-tests && chmod +x /tmp/candle-tests
  bash $ST/run-on-gpu-machine.sh $ST/warpfold.xz --version
fi
[ "$stage" = put ] && exit 0
if [ "$stage" = seven ]; then
  # The Qwen2.5-7B architecture (random bf16 weights made here, the same file for both) scoring the
  # stress and production corpora: warpfold packed in bins of 16,384 tokens against transformers as a
  # careful user runs it (length-sorted batches of at most 16,384 padded tokens, sdpa), and the
  # per-document scores compared.
  M=/tmp/models/qwen2.5-7b
  [ -f $M/config.json ] || $PY bench/gpu/make_random_decoder.py qwen2.5-7b $M
  for c in stress production; do
    $W --model /tmp/wf-models/all-MiniLM-L6-v2 corpus --kind $c --documents 256 > /tmp/$c.jsonl
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
  exit 0
fi
if [ "$stage" = paged ]; then
  # The paged-decode test alone, its whole output (the minilm stage's log keeps only the panic line).
  /tmp/candle-tests --ignored gpu_paged --test-threads 1 --nocapture 2>&1 | tee "$OUT/gpu-paged-test.log"
  exit 0
fi
[ -x $W ] || { echo "no $W: the stream is not complete"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
$PY -c "import sentence_transformers as s, torch; print('sentence-transformers', s.__version__, 'torch', torch.__version__)"
echo "=== 1. MiniLM (fused kernels) vs sentence-transformers' fixture vectors"
$PY -c "import json; [print(json.dumps({'text': i['text']})) for i in json.load(open('tests/fixtures/minilm_reference.json'))['items']]" \
  | $W --device cuda embed > "$OUT/minilm-fixture.jsonl"
$PY bench/gpu/check.py minilm tests/fixtures/minilm_reference.json "$OUT/minilm-fixture.jsonl" | tee -a "$OUT/checks.jsonl"
echo "=== 2. gated GPU tests"
if [ -x /tmp/candle-tests ]; then
  /tmp/candle-tests --ignored gpu_ --test-threads 1 --nocapture 2>&1 | grep -E "^test |result|cosine|error|panick" | tee "$OUT/gpu-tests.log"
else
  echo "(no test binary carried)"
fi
echo "=== 3. stage profiles"
for mode in kernels candle; do
  if [ $mode = candle ]; then export WARPFOLD_ENCODER_KERNELS=candle; else unset WARPFOLD_ENCODER_KERNELS; fi
  WARPFOLD_PROFILE=1 $W --device cuda --bin-tokens 16384 bench --corpus stress --documents 512 --packer-sequences 1000 2> "$OUT/profile-$mode.txt" >/dev/null
  echo "--- $mode: $(grep -c 'profile: bin of' "$OUT/profile-$mode.txt") bins"
  $PY - "$OUT/profile-$mode.txt" <<'PY'
import collections, re, sys
stages, tokens, bins = collections.Counter(), 0, 0
for line in open(sys.argv[1]):
    m = re.match(r"profile: bin of (\d+) tokens", line)
    if m:
        tokens += int(m.group(1)); bins += 1; continue
    m = re.match(r"profile:\s+(.+?)\s+([\d.]+) ms", line)
    if m:
        stages[m.group(1)] += float(m.group(2))
total = sum(stages.values())
print(f"{bins} bins, {tokens} tokens, {total:.1f} ms in timed stages, {tokens / total * 1e3:,.0f} tokens/s while profiled")
for name, ms in stages.most_common():
    print(f"  {name:<34} {ms:9.1f} ms {100 * ms / total:5.1f}%  {ms / max(bins, 1):7.3f} ms a bin")
PY
done
unset WARPFOLD_ENCODER_KERNELS
echo "=== 4. speed: packed / padded / end to end / sentence-transformers (batch 32 and 256), one run"
$W --device cuda --bin-tokens 16384 bench --documents 2048 --peer --peer-python "$PY" --peer-batch 32,256 --out "$OUT/gpu-minilm-s10.json"
echo "--- the same engine with candle's element-wise ops (no peer)"
WARPFOLD_ENCODER_KERNELS=candle $W --device cuda --bin-tokens 16384 bench --documents 2048 --packer-sequences 1000 --out "$OUT/gpu-minilm-s10-candle-ops.json" 2>&1 | grep -E "packed|padded|end to end"
for bin in 8192 32768; do
  echo "--- bins of $bin tokens (fused kernels, no peer)"
  $W --device cuda --bin-tokens $bin bench --documents 2048 --packer-sequences 1000 --out "$OUT/gpu-minilm-s10-bin$bin.json" 2>&1 | grep -E "packed|end to end"
done
echo "=== done"
