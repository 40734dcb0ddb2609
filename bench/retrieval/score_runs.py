#!/usr/bin/env python3
"""Scores TREC run files of one known-item set as warpfold_run.py and bm25.py score theirs.

For runs written where ir_measures is not installed (the GPU machine: warpfold_run.py writes
WORK/run-<mode>.trec there and scores nothing), and to add a measure to runs made earlier.

Usage: .venv-retrieval/bin/python bench/retrieval/score_runs.py SET_DIR RUN.trec [RUN.trec ...]
Prints one markdown row per run: nDCG@10, MRR@10, recall@10, recall@100, over the queries of
qrels.tsv (a query the run lacks scores 0, as in warpfold_run.py).
"""
import os
import sys

import ir_measures
from ir_measures import R, RR, nDCG

MEASURES = {"nDCG@10": nDCG @ 10, "MRR@10": RR @ 10, "recall@10": R @ 10, "recall@100": R @ 100}


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    qrels = list(ir_measures.read_trec_qrels(os.path.join(argv[1], "qrels.tsv")))
    print(f"{os.path.basename(os.path.normpath(argv[1]))}: {len({q.query_id for q in qrels})} queries")
    print("| run | " + " | ".join(MEASURES) + " |")
    print("| --- |" + " ---: |" * len(MEASURES))
    for path in argv[2:]:
        run = list(ir_measures.read_trec_run(path))
        agg = ir_measures.calc_aggregate(list(MEASURES.values()), qrels, run)
        print(f"| {path} | " + " | ".join(f"{float(agg[m]):.4f}" for m in MEASURES.values()) + " |")


if __name__ == "__main__":
    main(sys.argv)
