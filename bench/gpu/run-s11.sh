#!/usr/bin/env bash
# Session 11, on the GPU machine (after bench/gpu/pack-s11.sh here):
#
#   bash bench/gpu/run-s11.sh put         # append the carried stream part (one per call, in order, on
#                                         # a warm machine); after the last, check and unpack into /tmp/st
#   bash bench/gpu/run-s11.sh summarize   # the sample documents summarized on the GPU
#
# Summaries on the GPU through the paged key/value cache with 32-token blocks (the pool's block size
# went 32 -> 256 -> 32 over sessions 10 and 11): `warpfold make-samples`, then `warpfold --device cuda
# summarize` with SmolLM2-135M-Instruct (the chat model carried here; the GPU default, Qwen2.5-Coder-1.5B,
# is too large to carry), the paged path (the CUDA default) and the gathered one
# (WARPFOLD_DECODE_ATTENTION=gathered), greedy: the texts for a person to read, and the two paths'
# summaries compared.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
stage=${1:-put}
exec > >(tee "$OUT/s11-$stage.log") 2>&1
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib WARPFOLD_MODELS_DIR=/tmp/wf-models WARPFOLD_LOG=${WARPFOLD_LOG:-warn}
W=/tmp/warpfold
ST=/tmp/st
bash bench/gpu/stream.sh put || exit 1
if [ ! -f $ST/.opened ] && [ "$(wc -l < /tmp/stream.parts)" = "$(cat .gpu-extra/stream/PARTS)" ]; then
  bash bench/gpu/stream.sh open $ST && touch $ST/.opened
  mkdir -p /tmp/wf-models && tar -C /tmp/wf-models -xf $ST/smollm2.tar
  bash $ST/run-on-gpu-machine.sh $ST/warpfold.xz --version
fi
[ "$stage" = put ] && exit 0
if [ "$stage" = summarize ]; then
  rm -rf /tmp/samples && $W make-samples /tmp/samples
  M=/tmp/wf-models/SmolLM2-135M-Instruct
  for run in paged gathered; do
    env=() && [ $run = gathered ] && env=(WARPFOLD_DECODE_ATTENTION=gathered)
    env "${env[@]}" $W --device cuda summarize /tmp/samples --decoder $M --temperature 0 --json \
      > "$OUT/summaries-$run.jsonl" 2> "$OUT/summaries-$run.err"
    echo "$run: exit $?, $(wc -l < "$OUT/summaries-$run.jsonl") documents"; tail -2 "$OUT/summaries-$run.err"
  done
  python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
runs = {r: [json.loads(l) for l in open(f"{out}/summaries-{r}.jsonl")] for r in ("paged", "gathered")}
same = sum(a.get("summary") == b.get("summary") for a, b in zip(runs["paged"], runs["gathered"]))
print(f"paged and gathered summaries identical: {same} of {len(runs['paged'])}")
PY
fi
