#!/usr/bin/env bash
# The facts set's summaries on the GPU (BENCHMARKS.md "Summaries"): the `facts` example built with
# CUDA (crates/summarize/examples/facts.rs) summarizes tests/data/facts with the default chat model
# and reports key facts kept, items the documents do not hold before and after the check, and
# documents per minute. bench/gpu/pack-facts.sh packs the stream; then, within the machine's warm
# time:
#   bash bench/gpu/run-facts.sh put     # with each part of the stream but the last
#   bash bench/gpu/run-facts.sh run     # with the last: opens the stream and summarizes
. "$(dirname "$0")/env.sh"
log_to facts-${1:-run}.log
bash bench/gpu/stream.sh put || exit 1
[ "${1:-run}" != put ] || exit 0
[ -d $ST ] || bash bench/gpu/stream.sh open $ST || exit 1
host_info
sha256sum $Q
# the example reads the set where it was built (fact_documents::data_file): this checkout's path on
# the build machine (BUILT_IN, default /work/main)
root=${BUILT_IN:-/work/main}
mkdir -p $root/crates/summarize $root/tests/data/facts
[ -f $root/tests/data/facts/documents.jsonl ] || cp tests/data/facts/documents.jsonl $root/tests/data/facts/
xz -dc $ST/facts.xz > /tmp/facts && chmod +x /tmp/facts
/usr/bin/time -f "wall %e s" /tmp/facts $Q --cuda --texts $ST/fact-texts.jsonl --out "$OUT/facts-gpu.jsonl" 2>&1 | tail -3
tail -1 "$OUT/facts-gpu.jsonl"
echo "=== done"
