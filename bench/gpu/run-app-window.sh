#!/usr/bin/env bash
# Issue 14: the app core on the GPU, with the flash-attn build: the fixed against the adaptive window.
# Call 1 carries .gpu-extra (the f16 MiniLM: `bash bench/gpu/run-app-window.sh models`); call 2, on the
# same warm machine, carries .gpu (the binary) and runs everything else:
#   1. bench-index on 600 generated PDFs, --window fixed (the source project's trigger) then adaptive:
#      the before/after of the indexing path, with its stage times, bin fill and device idle;
#   2. the app core (`warpfold serve`, what the desktop runs) watching the same PDFs, adaptive then
#      fixed, searches asked all along (latency under load), /api/state and /metrics kept;
#   3. the model's own rate on the very chunks the app indexed (`warpfold embed` of ready texts);
#   4. the app core again under --vram-budget 8GiB (a gaming card).
. "$(dirname "$0")/env.sh"
if [ "${1:-}" = models ]; then
  unpack_minilm .gpu-extra/minilm-f16.tar.xz && ls /tmp/wf-models
  exit
fi
app_start run-app.log
echo "=== 1. bench-index, 600 PDFs: fixed window, then adaptive"
for w in fixed adaptive; do
  index_pdfs 600 /tmp/bi-$w "$OUT/bench-index-$w.json" --window $w | tail -12
done
echo "=== 2. the app core watching the same 600 PDFs"
for w in adaptive fixed; do
  python3 bench/gpu/app_core.py $W /tmp/bi-adaptive/pdfs "$OUT/app-$w.json" --window $w | tail -30
done
echo "=== 3. the model's own rate on the chunks the app indexed"
db=$(python3 -c 'import glob; print(sorted(glob.glob("/tmp/app-adaptive-*/index.db"))[-1])')
dump_chunks "$db" && echo "chunks dumped from $db"
wc -l /tmp/chunks.jsonl
for i in 1 2; do $W --device cuda embed --json < /tmp/chunks.jsonl > /dev/null 2> "$OUT/embed-chunks-$i.txt"; tail -1 "$OUT/embed-chunks-$i.txt"; done
echo "=== 4. the app core under an 8 GiB budget"
python3 bench/gpu/app_core.py $W /tmp/bi-adaptive/pdfs "$OUT/app-8gib.json" --extra --vram-budget 8GiB | tail -30
echo "=== done"
