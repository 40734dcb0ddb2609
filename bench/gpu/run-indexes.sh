#!/usr/bin/env bash
# The known-item sets indexed on the card with multilingual-e5-small and all-MiniLM-L6-v2
# (bench/retrieval/warpfold_run.py --index-only), and the index files brought back, so that every
# ranking is measured on the build machine's CPU on the same indexes (warpfold_run.py --index-built).
# Calls within the machine's warm time, one per part of the stream `MINILM=1 bash
# bench/gpu/pack-languages.sh` packs (the sets, both models and the CUDA binary):
#   bash bench/gpu/run-indexes.sh put       # each part but the last
#   bash bench/gpu/run-indexes.sh run       # with the last: opens the stream, indexes every set, packs
#                                           # the indexes (one xz tar in 15 MB pieces) and brings back four
#   bash bench/gpu/run-indexes.sh back      # the next four pieces, until none is left
# On the build machine: cat indexes-* | xz -dc | tar -C /tmp/retrieval -xf -
. "$(dirname "$0")/env.sh"
stage=${1:-run}
# The next four pieces of the indexes (15 MB each: what one call can bring back) into $OUT.
bring_back() {
  for piece in $(ls /tmp/back | head -4); do mv /tmp/back/$piece "$OUT/"; done
  ls -la "$OUT"; echo "pieces left: $(ls /tmp/back | wc -l)"
}
sets() { ls /tmp/sets | sort; }
if [ "$stage" = back ]; then
  bring_back
  exit
fi
stream_stage indexes "$stage" open_sets
host_info
echo "=== warm-up (candle's PTX compiled on a fresh machine)"
t=$(date +%s); echo '{"text": "warm up"}' | $W --device cuda --model multilingual-e5-small embed > /dev/null; echo "warm-up $(( $(date +%s) - t )) s"
for set in $(sets); do
  for model in multilingual-e5-small all-MiniLM-L6-v2; do
    echo "=== $set $model"
    PYTHONUNBUFFERED=1 python3 bench/retrieval/warpfold_run.py /tmp/sets/$set --index-only --bin $W --device cuda --model $model 2>&1 |
      grep -v '^+ ' | tail -2
  done
done
mkdir -p /tmp/back
(cd /tmp/sets && tar -cf - */warpfold-*/index.db */warpfold-*/index.json) | xz -T8 -6 | split -b 15000000 -d -a 2 - /tmp/back/indexes-
bring_back
echo "=== done"
