#!/usr/bin/env bash
# Session 6, second run (issue 14.3): where the writer's time goes on the GPU machine (its processor
# time and transactions are now in the report), and whether the in-flight budget (4 or 8 bins) is
# what changed BERT-large's rate between session 5 (600 PDFs, 4 bins: 91% of its own rate while
# busy) and run s6 (2,000 PDFs, 8 bins: 66%). Set-up as run-app-s6.sh.
. "$(dirname "$0")/env.sh"
log_to run-app-s6b.log
rm -f $W; unpack_warpfold | tail -1
need_minilm
nproc; date -u
summary() {
  python3 - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["indexing"]["run"]
st = r["stages"]
busy = r["backend_busy_seconds"]
print(f'  {r["tokens"]} tokens in {r["seconds"]:.2f} s = {r["tokens_per_second"]:.0f} tok/s; busy {busy:.2f} s '
      f'({r["tokens"]/busy:.0f} tok/s while busy), {r["bins"]} bins, fill {r["mean_bin_fill"]:.2f}, starved {r["device_starved_seconds"]:.3f} s')
print(f'  stages: extract {st["extract"]:.1f}, chunk {st["chunk"]:.1f}, submit {st["submit"]:.2f}, embed_wait {st["embed_wait"]:.2f}, '
      f'write {st["write"]:.2f} s ({st["write_cpu"]:.2f} s on a core, {st["write_transactions"]} transactions)')
PY
}
echo "=== 1. MiniLM, 600 PDFs: in-flight 8 bins, then 4"
for b in 8 4; do
  WARPFOLD_IN_FLIGHT_BINS=$b index_pdfs 600 /tmp/bi$b "$OUT/s6b-minilm-$b.json" >/dev/null
  echo "in-flight $b:"; summary "$OUT/s6b-minilm-$b.json"
done
bash bench/gpu/make-bert-large.sh >/dev/null 2>&1
echo "=== 2. BERT-large (random weights), 600 then 2,000 PDFs: in-flight 4, then 8"
for n in 600 2000; do for b in 4 8; do
  WARPFOLD_IN_FLIGHT_BINS=$b index_pdfs $n /tmp/bl$n-$b "$OUT/s6b-large-$n-$b.json" --model $L >/dev/null
  echo "$n PDFs, in-flight $b:"; summary "$OUT/s6b-large-$n-$b.json"
done; done
echo "=== 3. BERT-large's own rate on the 2,000 PDFs' chunks (the last index)"
dump_chunks "$(python3 -c 'import glob, os; print(max(glob.glob("/tmp/bl2000-8/**/*.db", recursive=True), key=os.path.getmtime))')"
own_rate --model $L
echo "=== done"
