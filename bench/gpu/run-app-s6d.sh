#!/usr/bin/env bash
# Session 6, fourth run (issue 14.3): before and after this session's indexing changes in ONE run on
# one machine (the H200 hosts differ from run to run: extraction alone took 4.2 s in session 5 and
# 5.7 s in run s6 on the same 600 PDFs). Before: the session-5 build (eff3a22, .gpu-old); after: this
# session's (.gpu). `warpfold index` of the same 600 PDFs, alternating old/new/new/old, MiniLM then
# BERT-large (random f16 weights); each model's own rate on the chunks; and the new build with half
# the workers (--jobs 8), to see how much of the device-bound gap is the host's load.
# Call 1: `bash bench/gpu/run-app-s5.sh models` carrying .gpu-extra; call 2: this, carrying .gpu and .gpu-old.
. "$(dirname "$0")/env.sh"
log_to run-app-s6d.log
O=/tmp/warpfold-old
need_old_build $O
nproc; date -u; grep -m1 "model name" /proc/cpuinfo
index_pdfs 600 /tmp/d "$OUT/s6d-bench-index.json" | tail -3
P=$(pdf_dir /tmp/d)
run() { # label binary "global args" index-args...
  local label=$1 bin=$2 global=$3; shift 3
  rm -f /tmp/d-run.db*
  echo "--- $label"
  $bin --device cuda $global index $P --db /tmp/d-run.db "$@" 2>/dev/null | grep -E "tokens/s|time by stage"
}
for m in "" "--model $L"; do
  echo "=== model: ${m:-MiniLM}"
  run old $O "$m"; run new $W "$m"; run new $W "$m"; run old $O "$m"
  run "new, --jobs 8" $W "$m" --jobs 8
  dump_chunks /tmp/d-run.db
  echo "--- own rate"; own_rate $m
done
echo "=== done"
