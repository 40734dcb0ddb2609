#!/usr/bin/env bash
# `warpfold ask` on the whole QA set (tests/data/qa/questions.jsonl, 105 questions over the 51
# documents of tests/data/facts; the long reports as PDFs of several pages): answer, citation and
# refusal accuracy, and the time the answers took. Usage: bench/qa/run.sh [OUT_DIR] [ask flags...]
# QUESTIONS=FILE asks the questions of FILE instead (some lines of the set).
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:-bench/out/qa}"
shift || true
mkdir -p "$out"
cargo run --release --locked -q -p warpfold --example qa_documents -- "$out"
rm -f "$out/index.db"*
./target/release/warpfold index "$out/docs" --db "$out/index.db" 2>"$out/index.log"
/usr/bin/time -v ./target/release/warpfold ask --db "$out/index.db" --questions "${QUESTIONS:-tests/data/qa/questions.jsonl}" "$@" \
    >"$out/answers.jsonl" 2>"$out/ask.log"
grep -E "question\(s\)|Elapsed|Maximum resident" "$out/ask.log" || true
python3 bench/qa/score.py "$out/answers.jsonl" "$out/pages.jsonl" --verbose | tee "$out/score.txt" | tail -1
