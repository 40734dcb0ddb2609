#!/usr/bin/env bash
# Search in other languages on the GPU (BENCHMARKS.md "Search in other languages"): every set that
# bench/gpu/pack-languages.sh packed, indexed with multilingual-e5-small on the card and searched
# through the binary (bench/retrieval/warpfold_run.py, semantic and hybrid), the runs brought back
# as $OUT/runs.tar.xz and scored on the build machine (bench/retrieval/score_runs.py), where the
# relevance judgements are. Two calls within the machine's warm time:
#   bash bench/gpu/run-languages.sh put     # with the first part of the stream
#   bash bench/gpu/run-languages.sh run     # with the last: opens the stream, runs every set
. "$(dirname "$0")/env.sh"
stage=${1:-run}
stream_stage languages "$stage" open_sets
host_info
echo "=== warm-up (candle's PTX compiled on a fresh machine)"
t=$(date +%s); echo '{"text": "warm up"}' | $W --device cuda --model multilingual-e5-small embed > /dev/null; echo "warm-up $(( $(date +%s) - t )) s"
for set in $(ls /tmp/sets); do
  echo "=== $set"
  PYTHONUNBUFFERED=1 python3 bench/retrieval/warpfold_run.py /tmp/sets/$set --modes keyword,semantic,hybrid --bin $W --device cuda \
    --model multilingual-e5-small --work /tmp/work/$set --out /tmp/json 2>&1 | grep -v '^+ ' | tail -8
done
(cd /tmp/work && tar -cf - */run-*.trec */index.json) | xz -T8 -6 > "$OUT/runs.tar.xz"
(cd /tmp && tar -cf - json) | xz -6 > "$OUT/json.tar.xz"
echo "=== done"
