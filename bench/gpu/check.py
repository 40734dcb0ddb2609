"""Checks warpfold's GPU outputs against references, on the GPU machine (standard library only).

  check.py minilm FIXTURE.json WARPFOLD_EMBED.jsonl   # cosine vs sentence-transformers' vectors
  check.py decoder EXPECTED.json WARPFOLD_SCORE.jsonl # mean log-likelihood vs transformers
Prints one JSON line with the worst case and whether it is within tolerance; exit 1 if not.
"""
import json
import math
import sys


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def main(kind, reference, ours):
    out = [json.loads(line) for line in open(ours)]
    if kind == "minilm":
        items = json.load(open(reference))["items"]
        worst = min(cosine(i["embedding"], o["embedding"]) for i, o in zip(items, out))
        ok = len(out) == len(items) and worst >= 0.999
        print(json.dumps({"check": "minilm vs sentence-transformers", "texts": len(out), "min_cosine": worst, "tolerance": 0.999, "ok": ok}))
    else:
        seqs = json.load(open(reference))["sequences"]
        worst = max(abs(s["mean_log_likelihood"] - o["mean_log_likelihood"]) for s, o in zip(seqs, out))
        ok = len(out) == len(seqs) and worst <= 0.05
        print(json.dumps({"check": f"decoder vs transformers ({reference})", "sequences": len(out), "max_abs_diff_mean_ll": worst, "tolerance": 0.05, "ok": ok}))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main(*sys.argv[1:4])
