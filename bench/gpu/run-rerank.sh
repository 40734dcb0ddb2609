#!/usr/bin/env bash
# The known-item sets' hybrid search with the chat model reranking the first 10 hits of every query
# (BENCHMARKS.md "Known-item retrieval"), on the GPU: each set that bench/gpu/pack-rerank.sh packed,
# indexed on the card with all-MiniLM-L6-v2 (the default) and with all-mpnet-base-v2, searched
# through the binary (bench/retrieval/warpfold_run.py: hybrid, and hybrid with --rerank 10 by the
# default chat model), the runs brought back as $OUT/runs.tar.xz and scored on the build machine
# (bench/retrieval/score_runs.py), where the relevance judgements are. Calls within the machine's
# warm time:
#   bash bench/gpu/run-rerank.sh put     # with each part of the stream but the last
#   bash bench/gpu/run-rerank.sh run     # with the last: opens the stream, runs every set
. "$(dirname "$0")/env.sh"
stage=${1:-run}
opened() {
  mkdir -p /tmp/wf-models /tmp/rr
  xz -dc $ST/inputs.tar.xz | tar -C /tmp/rr -xf -
  mv /tmp/rr/all-MiniLM-L6-v2 /tmp/rr/all-mpnet-base-v2 /tmp/wf-models/
}
stream_stage rerank "$stage" opened
host_info
sha256sum $Q
echo "=== warm-up (candle's PTX compiled on a fresh machine)"
t=$(date +%s); echo '{"text": "warm up"}' | $W --device cuda embed > /dev/null; echo "warm-up $(( $(date +%s) - t )) s"
for set in $(ls /tmp/rr/sets); do
  for model in all-MiniLM-L6-v2 all-mpnet-base-v2; do
    echo "=== $set, $model"
    PYTHONUNBUFFERED=1 python3 bench/retrieval/warpfold_run.py /tmp/rr/sets/$set --modes hybrid --rerank 10 --decoder $Q --bin $W \
      --device cuda --model /tmp/wf-models/$model --work /tmp/work/$set-$model --out /tmp/json 2>&1 | grep -v '^+ ' | tail -6
  done
done
(cd /tmp/work && tar -cf - */run-*.trec */index.json) | xz -T8 -6 > "$OUT/runs.tar.xz"
(cd /tmp && tar -cf - json) | xz -6 > "$OUT/json.tar.xz"
echo "=== done"
