#!/usr/bin/env bash
# Where the Qwen2.5-7B architecture's time goes: `WARPFOLD_PROFILE=1` makes the decoder synchronize
# around each stage of its forward (embedding, norms, each matmul, rope, attention, SiLU·up, lm_head,
# log-softmax) and print the totals per bin; then the same corpus without profiling, for the speed
# and the GPU's idle time between bins (CUDA events, pinned staging).
. "$(dirname "$0")/env.sh"
need_warpfold
m=qwen2.5-7b
[ -f /tmp/models/$m/config.json ] || $PY bench/gpu/make_random_decoder.py $m /tmp/models/$m
# The corpus's ids come from MiniLM's tokenizer (carried in .gpu/meta.tar.xz, no weights needed).
corpus_model
$W --model /tmp/corpus-model corpus --kind stress --documents 256 > /tmp/stress.jsonl
head -64 /tmp/stress.jsonl > /tmp/stress64.jsonl
WARPFOLD_PROFILE=1 timeout 200 $W --device cuda --bin-tokens ${BIN:-65536} score --decoder /tmp/models/$m --json < /tmp/stress64.jsonl > /dev/null 2> "$OUT/profile-7b.err"
grep "^profile" "$OUT/profile-7b.err" | tail -40
echo "profiled run: $(tail -1 "$OUT/profile-7b.err")"
# Speed, GPU idle and peak memory (nvidia-smi, whole process) against the bin size.
for bin in ${BINS:-16384 32768 65536}; do
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > /tmp/smi-$bin.csv &
  smi=$!
  timeout 200 $W --device cuda --bin-tokens $bin score --decoder /tmp/models/$m --json < /tmp/stress.jsonl > "$OUT/wf-7b-stress-$bin.jsonl" 2> "$OUT/wf-7b-stress-$bin.err"
  kill $smi
  echo "7B stress, 256 documents, bins of $bin: $(tail -1 "$OUT/wf-7b-stress-$bin.err") peak MiB $(sort -n /tmp/smi-$bin.csv | tail -1)"
done
