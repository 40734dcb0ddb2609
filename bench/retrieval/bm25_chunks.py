#!/usr/bin/env python3
"""bm25.py's anchor (same tokenizer, stemmer and stop words, bm25s defaults), but over passages of
W words (overlapping by W/8) instead of whole documents, a document ranked by its best passage: how
much of the gap between warpfold's keyword ranking (which ranks chunks) and the whole-document
anchor is the unit that is ranked rather than the ranking itself. W = 0 ranks whole documents (bm25.py's
figure).

    .venv-retrieval/bin/python bench/retrieval/bm25_chunks.py SET_DIR W

Prints nDCG@10. Measured on `epyc4`, 2026-12-07 (W = 0 / 150 / 300): manpages-de 0.692 / 0.650 /
0.655; manpages-fr 0.684 / – / 0.678; manpages (English) 0.661 / – / 0.657.
"""
import os
import sys

import bm25s
import ir_measures
import Stemmer
from ir_measures import nDCG

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bm25 as anchor  # noqa: E402


def main(set_dir, width):
    corpus = anchor.load_jsonl(os.path.join(set_dir, "corpus.jsonl"))
    queries = anchor.load_jsonl(os.path.join(set_dir, "queries.jsonl"))
    qrels = list(ir_measures.read_trec_qrels(os.path.join(set_dir, "qrels.tsv")))
    language = anchor.set_language(set_dir)
    algorithm, stopwords = anchor.LANGUAGES[language]
    stemmer = Stemmer.Stemmer(algorithm) if algorithm else None
    prepare = anchor.cjk_pairs if algorithm is None else (lambda t: t)
    passages, owner = [], []
    for d in corpus:
        words = prepare(d.get("title", "") + "\n" + d["text"]).split()
        if width == 0:
            passages.append(" ".join(words))
            owner.append(d["id"])
            continue
        step = max(1, width - width // 8)
        for start in range(0, max(1, len(words)), step):
            passages.append(" ".join(words[start:start + width]))
            owner.append(d["id"])
            if start + width >= len(words):
                break
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(passages, stopwords=stopwords, stemmer=stemmer, show_progress=False), show_progress=False)
    asked = bm25s.tokenize([prepare(q["text"]) for q in queries], stopwords=stopwords, stemmer=stemmer, show_progress=False)
    found, scores = retriever.retrieve(asked, k=min(300, len(passages)), show_progress=False)
    run = []
    for i, q in enumerate(queries):
        best = {}
        for passage, score in zip(found[i], scores[i]):
            best.setdefault(owner[passage], float(score))
        run.extend(ir_measures.ScoredDoc(q["id"], doc, score) for doc, score in best.items())
    print(set_dir, f"W={width}", f"{len(passages)} passages", ir_measures.calc_aggregate([nDCG @ 10], qrels, run))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
