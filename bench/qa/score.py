#!/usr/bin/env python3
"""Scores `warpfold ask --questions` output (JSON lines) against tests/data/qa/questions.jsonl.

answer accuracy: answerable questions whose answer holds every key (lower case, thousands commas
removed); citation accuracy: answerable questions whose citations include the page of the question's
document that holds its evidence; refusal accuracy: unanswerable questions answered "not in your
documents"; false refusals: answerable questions refused.

    python3 bench/qa/score.py ANSWERS.jsonl PAGES.jsonl [--verbose]
"""
import json
import os
import re
import sys


def norm(text):
    text = " ".join(text.lower().split())
    return re.sub(r"(?<=\d),(?=\d)", "", text)


def squeeze(text):
    return " ".join(text.split())


def main():
    answers = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
    pages = {d["id"]: d for d in (json.loads(l) for l in open(sys.argv[2]) if l.strip())}
    verbose = "--verbose" in sys.argv
    n_ans = n_unans = right = cited = refused_right = refused_wrong = 0
    for a in answers:
        text = a["answer"]
        if a.get("evidence") is None:
            n_unans += 1
            ok = not a["answerable"]
            refused_right += ok
            if verbose:
                print(f"{a['id']} unanswerable {'OK ' if ok else 'BAD'} {text!r}")
            continue
        n_ans += 1
        doc = pages[a["doc"]]
        evidence = squeeze(a["evidence"])
        page = next((i + 1 for i, p in enumerate(doc["pages"]) if evidence in squeeze(p)), None)
        holds = a["answerable"] and all(norm(k) in norm(text) for k in a["answer_keys"])
        # by file name: the documents may have been indexed in another folder (on the GPU machine)
        name = os.path.basename(doc["path"])
        cites = any(os.path.basename(c["path"]) == name and (page is None or c["page"] == page) for c in a["citations"])
        right += holds
        cited += cites
        refused_wrong += not a["answerable"]
        if verbose:
            print(f"{a['id']} {'OK ' if holds else 'BAD'} {'cited' if cites else 'NOT CITED'} {a['answer_keys']} {text!r}")
    result = {
        "answerable": n_ans,
        "unanswerable": n_unans,
        "answer_accuracy": right / max(n_ans, 1),
        "citation_accuracy": cited / max(n_ans, 1),
        "refusal_accuracy": refused_right / max(n_unans, 1),
        "false_refusals": refused_wrong,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
