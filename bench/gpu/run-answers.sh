#!/usr/bin/env bash
# Answers, reranking and summaries with the real default chat model on the GPU, in one call once
# the stream (bench/gpu/pack-answers.sh, then `bash bench/gpu/run-answers.sh put` over consecutive
# calls; `run` with the last part) is open in /tmp/st, then `rest` in a second call (each call has
# ten minutes):
#   1. the QA set (tests/data/qa, 105 questions over 51 documents): `warpfold ask --questions`,
#      reading the 5 best hits, then the 5 best of 20 reranked by the chat model; the first token's
#      time for single questions;
#   2. the same questions through the pipeline a user would write (bench/gpu/peer_qa.py:
#      sentence-transformers, numpy, transformers with the same GGUF);
#   3. the facts set's summaries (crates/summarize/examples/facts.rs, .gpu/facts.xz carried with the
#      `rest` call): key facts kept, invented items before and after the check, on the GPU.
# Scored on the build machine (bench/qa/score.py; the facts example's own summary line).
. "$(dirname "$0")/env.sh"
stage=${1:-run}
opened() {
  mkdir -p /tmp/wf-models && xz -dc $ST/minilm-f16.tar.xz | tar -C /tmp/wf-models -xf -
  xz -dc $ST/qa.tar.xz | tar -C /tmp -xf -
}
# the second call (stage `rest`): the peer, then the summaries
peer_and_summaries() {
  echo "=== the peer: sentence-transformers, numpy and transformers (the same GGUF, dequantized to bf16)"
  gguf_peer
  /usr/bin/time -f "wall %e s" $PY bench/gpu/peer_qa.py $Q /tmp/wf-models/all-MiniLM-L6-v2 /tmp/qa/pages.jsonl \
    tests/data/qa/questions.jsonl "$OUT/peer-qa.jsonl" > "$OUT/peer-qa.json" 2> "$OUT/peer-qa.err"
  tail -1 "$OUT/peer-qa.json"; tail -2 "$OUT/peer-qa.err"
  echo "=== summaries of the facts set (51 documents)"
  [ -x /tmp/facts ] || { xz -dc .gpu/facts.xz > /tmp/facts && chmod +x /tmp/facts; }
  mkdir -p /tmp/wf-cuda/crates/summarize /tmp/wf-cuda/tests/data/facts && cp tests/data/facts/documents.jsonl /tmp/wf-cuda/tests/data/facts/
  /usr/bin/time -f "wall %e s" /tmp/facts $Q --cuda --texts $ST/fact-texts.jsonl --out "$OUT/facts-gpu.jsonl" 2>&1 | tail -3
  tail -1 "$OUT/facts-gpu.jsonl"
}
stream_stage answers $stage opened
host_info
sha256sum $Q
if [ "$stage" = rest ]; then
  peer_and_summaries
  exit 0
fi
echo "=== warm-up (candle's PTX compiled on a fresh machine)"
t=$(date +%s); echo '{"text": "warm up"}' | $W --device cuda embed > /dev/null; echo "warm-up $(( $(date +%s) - t )) s"
echo "=== index the QA documents"
rm -f /tmp/qa.db*
/usr/bin/time -f "index: wall %e s" $W --device cuda index /tmp/qa/docs --db /tmp/qa.db 2>&1 | tail -2
cp /tmp/qa/pages.jsonl "$OUT/qa-pages.jsonl"
echo "=== ask: 105 questions, 5 best hits, no reranking"
/usr/bin/time -f "wall %e s, max RSS %M KiB" $W --device cuda ask --db /tmp/qa.db --questions tests/data/qa/questions.jsonl \
  --decoder $Q --rerank 0 > "$OUT/qa-answers.jsonl" 2> "$OUT/qa-ask.err"; tail -2 "$OUT/qa-ask.err"
echo "=== ask: 105 questions, the 5 best of 20 reranked"
/usr/bin/time -f "wall %e s, max RSS %M KiB" $W --device cuda ask --db /tmp/qa.db --questions tests/data/qa/questions.jsonl \
  --decoder $Q --rerank 20 > "$OUT/qa-answers-rerank.jsonl" 2> "$OUT/qa-rerank.err"; tail -2 "$OUT/qa-rerank.err"
echo "=== single questions: first token and whole answer (the model loaded in each run)"
for q in "How much is the security deposit for the flat at 14 Rue des Tanneurs in Lyon?" \
  "What purchase price did Brightwater Logistics pay for Skovlund Fragt A/S?" "¿Qué salario anual ofrece Biolumen Ibérica a Itziar Montalbán-Okeke?"; do
  $W --device cuda ask "$q" --db /tmp/qa.db --decoder $Q 2>&1 | tail -1
done
echo "=== done"
