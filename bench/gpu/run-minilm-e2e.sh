#!/usr/bin/env bash
# Issue 17: all-MiniLM-L6-v2 end to end on the GPU (TAG names the logs and reports; LIBRARY=1 adds a
# run with the tokenizers library doing all the tokenizing), on the GPU machine, after
# `GPU_DIR=DIR bash bench/gpu/pack-minilm-tests.sh` here (the CUDA binary, the CUDA test binary when built,
# MiniLM in f16):
#
#   bash bench/gpu/run-minilm-e2e.sh put      # append the carried stream part (one per call, in order, on a
#                                      # warm machine); after the last, check and unpack into /tmp/st
#   bash bench/gpu/run-minilm-e2e.sh profile  # where a MiniLM bin's time goes (WARPFOLD_PROFILE=1), 512 stress
#                                      # documents, with the probe's bin and with bins of 16,384: each
#                                      # stage's total and the timed stages against the run's wall time
#   bash bench/gpu/run-minilm-e2e.sh minilm   # MiniLM's vectors against sentence-transformers' fixture; `warpfold
#                                      # bench` with the probe's bin against sentence-transformers at batch
#                                      # 32 and 256 (2,048 documents), then 8,192
#                                      # documents taking turns three times with batch 256; then the same
#                                      # 2,048 with the tokenizers library doing all of the tokenizing (LIBRARY=1)
#   bash bench/gpu/run-minilm-e2e.sh tests    # the gated GPU tests
. "$(dirname "$0")/env.sh"
stage=${1:-put}
TAG=${TAG:-minilm-e2e}
minilm_tests_stream "$TAG" "$stage"
nproc; lscpu | grep -m1 "Model name"
case $stage in
  profile)
    for bin in ${BINS:-58976 16384}; do
      args=() && [ $bin = probe ] || args=(--bin-tokens $bin)
      t0=$(date +%s%N)
      WARPFOLD_PROFILE=1 $W --device cuda "${args[@]}" bench --corpus stress --documents 512 --packer-sequences 1000 \
        > "$OUT/profile-minilm-$bin.txt" 2> "$OUT/profile-minilm-$bin.err"
      echo "--- bins: $bin ($(( ($(date +%s%N) - t0) / 1000000 )) ms for the whole bench)"
      $PY - "$OUT/profile-minilm-$bin.err" <<'PY'
import collections, re, sys
# Bins of at least 16,384 tokens (the packed run's) apart from smaller ones (the padded ablation's).
ansi = re.compile(r"\x1b\[[0-9;]*m")
groups = collections.defaultdict(lambda: [collections.Counter(), 0, 0, 0.0])
g = None
for line in open(sys.argv[1]):
    line = ansi.sub("", line)
    m = re.search(r"warpfold::profile: bin of (\d+) tokens \((\d+) sequences\), ([\d.]+) ms", line)
    if m:
        g = groups["bins >= 16384 tokens" if int(m.group(1)) >= 16384 else "smaller bins"]
        g[1] += 1; g[2] += int(m.group(1)); g[3] += float(m.group(3)); continue
    m = re.search(r"warpfold::profile:\s+(.+?)\s+([\d.]+) ms\s+[\d.]+%", line)
    if m and g is not None:
        g[0][m.group(1).strip()] += float(m.group(2))
for name, (stages, bins, tokens, total) in groups.items():
    print(f"{name}: {bins} bins, {tokens} tokens, {total:.1f} ms in timed stages = {tokens / max(total, 1e-9) * 1e3:,.0f} tokens/s of stage time")
    for stage, ms in stages.most_common():
        print(f"  {stage:<32} {ms:9.1f} ms {100 * ms / total:5.1f}%")
PY
      grep -E "bench|tokenizer|packed|VRAM" "$OUT/profile-minilm-$bin.err" | sed 's/\x1b\[[0-9;]*m//g' | head -8
    done ;;
  minilm)
    check_minilm
    $W --device cuda bench --documents 2048 --peer --peer-python "$PY" --peer-batch 32,256 --out "$OUT/gpu-minilm-$TAG-2048.json"
    $W --device cuda bench --documents 8192 --peer --peer-python "$PY" --peer-batch 256 --rounds 3 --out "$OUT/gpu-minilm-$TAG-8192.json"
    # The library doing all the tokenizing, on request (with it the call may run past a 600 s limit).
    if [ "${LIBRARY:-0}" = 1 ]; then
      WARPFOLD_TOKENIZER=library $W --device cuda bench --documents 2048 --peer --peer-python "$PY" --peer-batch 256 \
        --out "$OUT/gpu-minilm-$TAG-2048-library.json"
    fi ;;
  tests)
    HF_MODELS="smollm2-135m qwen2.5-7b" bash bench/gpu/run-gpu-tests.sh ;;
esac
echo "=== done $stage"
