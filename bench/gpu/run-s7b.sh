#!/usr/bin/env bash
# Session 7, after the last part of the stream (bench/gpu/stream.sh) is carried: unpack it (the
# binary, MiniLM, the two chat models' GGUFs, the summary documents, the peer's gguf wheel) and
# rerun the app-core measurement (run-app-s7.sh, TAG=s7b) with this build (queries ahead of queued
# bulk bins, the idle device's wake-up under the queue's lock). run-summarize-s7.sh comes next.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
bash bench/gpu/stream.sh put || exit 1
[ -d /tmp/st ] || bash bench/gpu/stream.sh open /tmp/st || exit 1
mkdir -p /tmp/wf-models
[ -d /tmp/wf-models/all-MiniLM-L6-v2 ] || xz -dc /tmp/st/minilm-f16.tar.xz | tar -C /tmp/wf-models -xf -
[ -x /tmp/warpfold ] || bash /tmp/st/run-on-gpu-machine.sh /tmp/st/warpfold.xz --version | tail -1
TAG=s7b bash bench/gpu/run-app-s7.sh
