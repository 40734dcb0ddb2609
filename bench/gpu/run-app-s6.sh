#!/usr/bin/env bash
# Session 6 (issue 14.3): the app core on the GPU after group commits (the writer bound session 5's
# runs at 11.6 ms per document) and a larger in-flight budget (8 bins). Same set-up as run-app-s5.sh:
# call 1 `bash bench/gpu/run-app-s5.sh models` carrying .gpu-extra, call 2 this script carrying .gpu.
#   1. bench-index on 600 generated PDFs with MiniLM (stage times, fill, device idle);
#   2. the app core (`warpfold serve`, what the desktop runs) watching them, then under --vram-budget 8GiB;
#   3. MiniLM's own rate on the chunks the app indexed (`warpfold embed` of ready texts);
#   4. device-bound: BERT-large's architecture (random f16 weights, MiniLM's tokenizer) on 2,000 PDFs
#      with bench-index and the app core, and its own rate on the same chunks.
. "$(dirname "$0")/env.sh"
app_start run-app-s6.log
echo "=== 1. bench-index, 600 PDFs, MiniLM"
index_pdfs 600 /tmp/bi "$OUT/s6-bench-index.json" | tail -12
echo "=== 2. the app core watching the same 600 PDFs; then under an 8 GiB budget"
python3 bench/gpu/app_core.py $W /tmp/bi/pdfs "$OUT/s6-app.json" --window adaptive | grep -v '^  ' | tail -24
python3 bench/gpu/app_core.py $W /tmp/bi/pdfs "$OUT/s6-app-8gib.json" --window adaptive --extra --vram-budget 8GiB | grep -v '^  ' | tail -24
echo "=== 3. MiniLM's own rate on the chunks the app indexed"
dump_chunks "$(ls -td /tmp/app-adaptive-*/index.db | head -1)"; own_rate
echo "=== 4. BERT-large architecture (random weights): device-bound, 2,000 PDFs"
bash bench/gpu/make-bert-large.sh >/dev/null 2>&1
index_pdfs 2000 /tmp/bl "$OUT/s6-large-bench-index.json" --model $L | tail -12
python3 bench/gpu/app_core.py $W /tmp/bl/pdfs "$OUT/s6-large-app.json" --window adaptive --extra --model $L | grep -v '^  ' | tail -24
dump_chunks "$(ls -td /tmp/app-adaptive-*/index.db | head -1)"; own_rate --model $L
echo "=== done"
