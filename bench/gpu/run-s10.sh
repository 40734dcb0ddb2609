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
. "$(dirname "$0")/env.sh"
stage=${1:-put}
# What this session's stream carries besides the binary: MiniLM and the CUDA test binary.
opened() {
  unpack_minilm $ST/minilm-f16.tar.xz
  [ -f $ST/candle-tests.xz ] && xz -dc $ST/candle-tests.xz > /tmp/candle-tests && chmod +x /tmp/candle-tests
}
stream_stage s10 "$stage" opened
if [ "$stage" = seven ]; then
  # The Qwen2.5-7B architecture (random bf16 weights made here, the same file for both) scoring the
  # stress and production corpora: warpfold packed in bins of 16,384 tokens against transformers as a
  # careful user runs it (length-sorted batches of at most 16,384 padded tokens, sdpa), and the
  # per-document scores compared.
  M=/tmp/models/qwen2.5-7b
  [ -f $M/config.json ] || $PY bench/gpu/make_random_decoder.py qwen2.5-7b $M
  for c in stress production; do
    $W --model /tmp/wf-models/all-MiniLM-L6-v2 corpus --kind $c --documents 256 > /tmp/$c.jsonl
    score_7b_careful $M $c
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
py_versions sentence_transformers torch
echo "=== 1. MiniLM (fused kernels) vs sentence-transformers' fixture vectors"
check_minilm
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
