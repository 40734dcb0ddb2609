#!/usr/bin/env bash
# The writer's commit cost on the GPU machine (issue 14): examples/commit_cost (built here, carried in
# .gpu-tools) on its disk, alone and with 16 busy processes at nice 10 (what PDF extraction does
# during a run), for documents of 8 chunks (the generated PDFs) and 30.
set -uo pipefail
T=.gpu-tools/commit_cost
df -h /tmp | tail -1; mount | grep -E " / | /tmp " | head -3
for chunks in 8 30; do echo "== alone, $chunks chunks"; TMPDIR=/tmp $T 600 $chunks; done
for i in $(seq 16); do nice -n 10 sh -c 'while :; do :; done' & done
sleep 1
for chunks in 8 30; do echo "== 16 busy processes at nice 10, $chunks chunks"; TMPDIR=/tmp $T 600 $chunks; done
kill $(jobs -p) 2>/dev/null
strace -V >/dev/null 2>&1 && echo "strace available" || echo "no strace"
which perf gdb 2>/dev/null
