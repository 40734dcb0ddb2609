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
. "$(dirname "$0")/env.sh"
stage=${1:-put}
# What this session's stream carries besides the binary: the chat model.
opened() { mkdir -p /tmp/wf-models && tar -C /tmp/wf-models -xf $ST/smollm2.tar; }
stream_stage s11 "$stage" opened
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
