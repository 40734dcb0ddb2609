#!/usr/bin/env bash
# Session 5, second GPU run (issue 14.3): after the workers were given a lower CPU priority. Same
# machine set-up as run-app-s5.sh (call 1: `bash bench/gpu/run-app-s5.sh models` carrying .gpu-extra;
# call 2: this script carrying .gpu):
#   1. bench-index on 600 generated PDFs with MiniLM, --window fixed then adaptive;
#   2. the app core (`warpfold serve`) watching them, adaptive;
#   3. the model's own rate on the chunks the app indexed (`warpfold embed` of ready texts);
#   4. a device-bound case: BERT-large's architecture (24 layers, 1024 wide; random f16 weights made
#      here with MiniLM's tokenizer), bench-index fixed then adaptive, and its own rate on the chunks.
. "$(dirname "$0")/env.sh"
app_start run-app-b.log
echo "=== 1. bench-index, 600 PDFs, MiniLM: fixed window, then adaptive"
for w in fixed adaptive; do
  index_pdfs 600 /tmp/bi-$w "$OUT/b-bench-index-$w.json" --window $w | tail -3
done
echo "=== 2. the app core watching the same 600 PDFs"
python3 bench/gpu/app_core.py $W /tmp/bi-adaptive/pdfs "$OUT/b-app-adaptive.json" --window adaptive | grep -v '^  ' | tail -24
echo "=== 3. MiniLM's own rate on the chunks the app indexed"
dump_chunks "$(python3 -c 'import glob; print(sorted(glob.glob("/tmp/app-adaptive-*/index.db"))[-1])')"
own_rate
echo "=== 4. BERT-large architecture (random weights): device-bound"
bash bench/gpu/make-bert-large.sh
for w in fixed adaptive; do
  index_pdfs 600 /tmp/bl-$w "$OUT/b-large-bench-index-$w.json" --model $L --window $w | tail -3
done
own_rate --model $L
echo "=== done"
