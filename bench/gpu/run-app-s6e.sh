#!/usr/bin/env bash
# Session 6, fifth run (issue 14.3): is the device thread slowed by the host's load? MiniLM's own rate
# on the 600 PDFs' chunks alone, then beside 16 busy processes at nice 10 and at nice 19 (what the
# extraction workers are during a run) [the first run hung after the nice-10 case: a bare `wait`
# waited for tee; fixed since]; then `warpfold index` at nice 0 and at nice -10 (the workers
# still set themselves to nice 10). Runs on the machine left warm by run-app-s6d.sh.
. "$(dirname "$0")/env.sh"
log_to run-app-s6e.log
[ -f /tmp/chunks.jsonl ] || { echo "run run-app-s6d.sh first"; exit 1; }
P=$(pdf_dir /tmp/d)
embed() { $W --device cuda embed --json < /tmp/chunks.jsonl 2>&1 >/dev/null | tail -1 | python3 -c "import json,sys; r=json.load(sys.stdin); print(f'  {r[\"tokens_per_second\"]:.0f} tokens/s, {r[\"bins\"]} bins, {r[\"seconds\"]:.2f} s')"; }
echo "=== embed alone"; embed
for n in 10 19; do
  pids=()
  for i in $(seq 16); do nice -n $n sh -c 'while :; do :; done' & pids+=($!); done
  sleep 0.5
  echo "=== embed beside 16 busy processes at nice $n"; embed
  kill "${pids[@]}" 2>/dev/null
done
for n in 0 -10; do
  rm -f /tmp/e-run.db*
  echo "=== warpfold index at nice $n"
  nice -n $n $W --device cuda index $P --db /tmp/e-run.db 2>/dev/null | grep -E "tokens/s|time by stage"
done
echo "=== done"
