#!/usr/bin/env bash
# Issue 14.3: the bulk lane's bin fill measured apart from the bins that answer searches
# (/metrics warpfold_bulk_bin_fill_ratio), with BERT-large (random f16, device-bound)
# and MiniLM, through the indexer (`warpfold index`) and the app core (`warpfold serve` watching the
# folder, what the desktop runs), each with the model's own rate on the very chunks. 1,200 generated
# PDFs (twice the 600 of the first runs, so the partial first and last bins weigh half as much).
# Call 1: `bash bench/gpu/run-app-window.sh models` carrying .gpu-extra/minilm-f16.tar.xz; call 2 this,
# carrying .gpu, on the same warm machine. TAG names the outputs (default app;
# run-app-summaries.sh app sets it up from a carried stream).
. "$(dirname "$0")/env.sh"
TAG=${TAG:-app}
log_to run-app-$TAG.log
need_warpfold | tail -1
need_minilm
host_info csv,noheader
index_pdfs 1200 /tmp/f "$OUT/$TAG-bench-index.json" | tail -2
P=$(pdf_dir /tmp/f)
echo "documents: $(ls $P | wc -l)"
bash bench/gpu/make-bert-large.sh >/dev/null 2>&1
own() { dump_chunks "$2"; echo "--- own rate"; own_rate $1; }
keys="seconds|tokens_per|fill|starved|bins|query_ms_p|documents_per"
for m in large minilm; do
  args=""; [ $m = large ] && args="--model $L"
  echo "=== $m: the indexer"
  rm -f /tmp/f-run.db*
  $W --device cuda $args index $P --db /tmp/f-run.db 2>/dev/null | grep -E "tokens/s|time by stage"
  own "$args" /tmp/f-run.db
  echo "=== $m: the app core"
  python3 bench/gpu/app_core.py $W $P "$OUT/$TAG-$m-app.json" --window adaptive ${args:+--extra $args} | grep -v '^  ' | grep -E "$keys"
done
echo "=== done"
