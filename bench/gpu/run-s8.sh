#!/usr/bin/env bash
# Session 8, after the last part of the stream (bench/gpu/pack-s8.sh, then bench/gpu/stream.sh put on
# consecutive calls) is carried: unpack it, then the summary run (run-summarize-s8.sh) and the
# app-core rerun with this build (run-app-s7.sh, TAG=s8: OCR is in the extraction path now; the
# corpus's PDFs all have text, so none is OCR'd).
. "$(dirname "$0")/env.sh"
stream_setup
case "${1:-}" in
  ours|peer|variants) bash bench/gpu/run-summarize-s8.sh "$1" ;;
  app) TAG=s8 bash bench/gpu/run-app-s7.sh ;;
  "") ;;
esac
