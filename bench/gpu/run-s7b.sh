#!/usr/bin/env bash
# Session 7, after the last part of the stream (bench/gpu/stream.sh) is carried: unpack it (the
# binary, MiniLM, the two chat models' GGUFs, the summary documents, the peer's gguf wheel) and
# rerun the app-core measurement (run-app-s7.sh, TAG=s7b) with this build (queries ahead of queued
# bulk bins, the idle device's wake-up under the queue's lock). run-summarize-s7.sh comes next.
. "$(dirname "$0")/env.sh"
stream_setup
TAG=s7b bash bench/gpu/run-app-s7.sh
