#!/usr/bin/env bash
# Session 6, sixth run (issue 14.3): the extraction workers spawned through prlimit (posix_spawn)
# instead of a pre_exec fork of the indexer. Before: the build of run s6d's "new" (.gpu-old, group
# commits, fork spawn); after: this one (.gpu). `warpfold index` of 600 generated PDFs, alternating
# before/after/after/before with MiniLM, before/after with BERT-large (random f16 weights), and each
# model's own rate on the chunks. Call 1: `bash bench/gpu/run-app-s5.sh models` carrying .gpu-extra.
. "$(dirname "$0")/env.sh"
log_to run-app-s6f.log
O=/tmp/warpfold-before
need_old_build $O
nproc; date -u; echo "prlimit: $(command -v prlimit || echo missing)"
index_pdfs 600 /tmp/f "$OUT/s6f-bench-index.json" | tail -2
P=$(pdf_dir /tmp/f)
run() { # label binary "global args"
  rm -f /tmp/f-run.db*
  echo "--- $1"
  $2 --device cuda $3 index $P --db /tmp/f-run.db 2>/dev/null | grep -E "tokens/s|time by stage"
}
own() { dump_chunks /tmp/f-run.db; echo "--- own rate"; own_rate $1; }
echo "=== MiniLM"
run before $O ""; run after $W ""; run after $W ""; run before $O ""; own ""
echo "=== BERT-large"
run before $O "--model $L"; run after $W "--model $L"; own "--model $L"
echo "=== done"
