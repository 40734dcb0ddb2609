#!/usr/bin/env python3
"""BM25 anchor for a set built by build.py, scored with ir-measures (pytrec_eval underneath).

Setup (once):
    python3 -m venv .venv-retrieval
    .venv-retrieval/bin/pip install bm25s PyStemmer ir-measures

Usage:
    .venv-retrieval/bin/python bench/retrieval/bm25.py [SET_DIR] [OUT_JSON]
SET_DIR defaults to /tmp/retrieval/manpages; OUT_JSON to SET_DIR/bm25.json.

One fixed configuration, not tuned to any set: bm25s defaults (method "lucene",
k1=1.5, b=0.75), bm25s's stop-word list and the Snowball stemmer (PyStemmer) of the set's
language, indexed text = title + "\n" + text. Top 100 per query. For a translated set
(`manpages-de`, ... see build.py) the language is the set name's suffix; Chinese and Japanese
have no stemmer, and their runs of characters are cut into overlapping pairs (as Lucene's CJK
analyzer does) before bm25s reads them, with no stop words.
"""
import os

for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(v, "1")

import json
import platform
import re
import sys
import time
from importlib.metadata import version

import bm25s
import ir_measures
import Stemmer
from ir_measures import R, RR, nDCG

K = 100
MEASURES = {"nDCG@10": nDCG @ 10, "MRR@10": RR @ 10, "recall@10": R @ 10, "recall@100": R @ 100}


# set-name suffix -> (PyStemmer algorithm, bm25s stop words); None: none of it.
LANGUAGES = {
    "en": ("english", "en"),
    "de": ("german", "german"),
    "fr": ("french", "french"),
    "es": ("spanish", "spanish"),
    "it": ("italian", "italian"),
    "ru": ("russian", "russian"),
    "ja": (None, None),
    "zh": (None, None),
}
CJK_RUN = re.compile(r"[\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f]+")


def set_language(set_dir):
    parts = os.path.basename(os.path.normpath(set_dir)).split("-")  # manpages-de, manpages-ja-part
    return parts[1] if parts[0] == "manpages" and len(parts) > 1 and parts[1] in LANGUAGES else "en"


def cjk_pairs(text):
    def cut(m):
        run = m.group(0)
        return " " + (run if len(run) == 1 else " ".join(run[i:i + 2] for i in range(len(run) - 1))) + " "
    return CJK_RUN.sub(cut, text)


def load_jsonl(p):
    with open(p, encoding="utf-8") as f:
        return [json.loads(l) for l in f if l.strip()]


def main(argv):
    set_dir = argv[1] if len(argv) > 1 else "/tmp/retrieval/manpages"
    out_json = argv[2] if len(argv) > 2 else os.path.join(set_dir, "bm25.json")
    corpus = load_jsonl(os.path.join(set_dir, "corpus.jsonl"))
    queries = load_jsonl(os.path.join(set_dir, "queries.jsonl"))
    qrels = list(ir_measures.read_trec_qrels(os.path.join(set_dir, "qrels.tsv")))

    language = set_language(set_dir)
    algorithm, stopwords = LANGUAGES[language]
    stemmer = Stemmer.Stemmer(algorithm) if algorithm else None
    prepare = cjk_pairs if language in ("ja", "zh") else (lambda t: t)
    t0 = time.perf_counter()
    doc_tokens = bm25s.tokenize(
        [prepare((d["title"] + "\n" + d["text"]).strip()) for d in corpus],
        stopwords=stopwords, stemmer=stemmer, return_ids=False, show_progress=False)
    retriever = bm25s.BM25()  # method="lucene", k1=1.5, b=0.75
    retriever.index(doc_tokens, show_progress=False)
    t_index = time.perf_counter() - t0

    t1 = time.perf_counter()
    q_tokens = bm25s.tokenize([prepare(q["text"]) for q in queries], stopwords=stopwords, stemmer=stemmer,
                              return_ids=False, show_progress=False)
    # A query whose every token is a stop word gets an empty list; bm25s wants at least one token.
    q_tokens = [t if t else ["\x00"] for t in q_tokens]
    idx, scores = retriever.retrieve(q_tokens, k=min(K, len(corpus)), show_progress=False, n_threads=1)
    t_search = time.perf_counter() - t1

    run = {}
    for qi, q in enumerate(queries):
        run[q["id"]] = {corpus[int(j)]["id"]: float(s) for j, s in zip(idx[qi], scores[qi]) if s > 0}
    agg = ir_measures.calc_aggregate(list(MEASURES.values()), qrels, run)
    res = {name: round(float(agg[m]), 4) for name, m in MEASURES.items()}
    res.update(
        set=os.path.basename(os.path.normpath(set_dir)),
        queries=len(queries),
        documents=len(corpus),
        qrels=len(qrels),
        queries_without_results=sum(1 for r in run.values() if not r),  # scored 0 by ir-measures
        index_seconds=round(t_index, 2),
        search_seconds=round(t_search, 2),
        config=f"bm25s lucene k1=1.5 b=0.75, stopwords={stopwords}, Snowball {algorithm} stemmer, "
        + ("CJK runs as overlapping pairs, " if language in ("ja", "zh") else "") + "title+text, top 100",
        language=language,
        versions={p: version(p) for p in ("bm25s", "PyStemmer", "ir-measures", "pytrec-eval-terrier", "numpy", "scipy")},
        python=platform.python_version(),
    )
    with open(out_json, "w") as f:
        json.dump(res, f, indent=2)
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main(sys.argv)
