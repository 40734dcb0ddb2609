#!/usr/bin/env bash
# Session 16 (issue 17): the stages of run-s15.sh (put, profile, minilm, tests) again, with the build
# that computes BERT's embeddings in one kernel and lets FlashAttention-2 read k and v in place; logs
# and reports named s16.
SESSION=s16 exec bash "$(dirname "$0")/run-s15.sh" "$@"
