#!/usr/bin/env bash
# Session 16 (issue 17): the stages of run-s15.sh (put, profile, minilm, tests) again, with the build
# that computes BERT's embeddings in one kernel (encoder_kernels::embed_layer_norm); logs and reports
# named s16.
SESSION=s16 exec bash "$(dirname "$0")/run-s15.sh" "$@"
