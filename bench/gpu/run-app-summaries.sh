#!/usr/bin/env bash
# After the last part of the stream (bench/gpu/pack-app-summaries.sh, then bench/gpu/stream.sh put on
# consecutive calls) is carried: unpack it, then the summary run (run-summarize-reports.sh) and the
# app-core indexing run (run-app-indexing.sh, TAG=app-ocr: OCR in the extraction path; the
# corpus's PDFs all have text, so none is OCR'd).
. "$(dirname "$0")/env.sh"
stream_setup
case "${1:-}" in
  ours|peer|variants) bash bench/gpu/run-summarize-reports.sh "$1" ;;
  app) TAG=${TAG:-app-ocr} bash bench/gpu/run-app-indexing.sh ;;
  "") ;;
esac
