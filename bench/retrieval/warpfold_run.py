#!/usr/bin/env python3
"""The known-item sets of build.py searched through warpfold itself, scored as bm25.py scores.

Why through the command: the numbers should be the ones a user of `warpfold index` and
`warpfold search` gets (its chunking, its FTS5 BM25, its MiniLM vectors, its fusion), not a
reimplementation's. The index crate is not called from here; the binary is run.

Steps, for one set:
1. Each corpus document becomes one text file, WORK/docs/<name>.txt: the title, a blank line and
   the text (the title alone dropped when empty), as bm25.py indexes title + text. <name> is the
   document id with every byte outside [A-Za-z0-9._-] written as %XX, so names are distinct and
   safe; WORK/docs.tsv maps names back to ids. Written once (kept while docs.tsv is complete).
2. `warpfold index WORK/docs --db WORK/index.db --prune --json`: a full index the first time,
   then a check that nothing changed (a second run re-reads nothing it has).
3. `warpfold search --queries Q --db WORK/index.db --json --mode M -k K` for each mode, one
   process per mode (index and model loaded once). K counts chunks; a document can hold many, so K
   is several times the 100 documents recall@100 needs.
4. Hits become documents: a hit's file name maps back to its id, and a document's first hit
   (its best chunk) gives its rank; later hits of it are dropped. The run is cut at 100 documents
   and written as WORK/run-<mode>.trec.
5. nDCG@10, RR@10 (reported as MRR@10) and R@100 (recall@100) from ir-measures, as bm25.py
   computes them, over the queries searched (all of qrels.tsv, or the first --limit queries).

--index-only stops after step 2; --index-built skips steps 1 and 2 and searches the index found in WORK
(one built on another machine: a hit maps back by its file name, so the folder it was built from
does not matter).

With --rerank N each mode is also run with `--rerank N` (the chat model judges the first N hits
of each query) and scored the same way, on the same queries.

Usage (from the repository root, after `cargo build --release -p warpfold`):
    .venv-retrieval/bin/python bench/retrieval/warpfold_run.py /tmp/retrieval/manpages \\
        [--modes keyword,semantic,hybrid] [--limit N] [--rerank N] [--chunks K] \\
        [--work DIR] [--out DIR] [--bin PATH] [--device cpu] [--model NAME] [--decoder MODEL.gguf]
WORK defaults to SET_DIR/warpfold; --out, when given, receives <set>-<mode>[-first<N>].json.
"""
import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from datetime import datetime, timezone

try:
    import ir_measures
    from ir_measures import R, RR, nDCG
    MEASURES = {"nDCG@10": nDCG @ 10, "MRR@10": RR @ 10, "recall@10": R @ 10, "recall@100": R @ 100}
except ImportError:  # the GPU machine: runs are written, and scored on the build machine (score_runs.py)
    ir_measures = None
    MEASURES = {}

DOCS = 100  # documents kept per query, as bm25.py's top 100
SAFE = re.compile(rb"[A-Za-z0-9._-]")


def load_jsonl(p):
    with open(p, encoding="utf-8") as f:
        return [json.loads(l) for l in f if l.strip()]


def file_name(doc_id):
    """The document id as a file name: bytes outside [A-Za-z0-9._-] as %XX (so '%' too)."""
    return "".join(chr(b) if SAFE.fullmatch(bytes([b])) else "%%%02X" % b for b in doc_id.encode("utf-8")) + ".txt"


def doc_names(corpus):
    """{file name: document id} of the corpus."""
    names = {file_name(d["id"]): d["id"] for d in corpus}
    if len(names) != len(corpus):
        sys.exit("two document ids map to one file name")
    return names


def write_docs(corpus, work):
    """WORK/docs/*.txt and WORK/docs.tsv (name, id), unless docs.tsv already lists the corpus."""
    docs, mapping = os.path.join(work, "docs"), os.path.join(work, "docs.tsv")
    names = doc_names(corpus)
    if os.path.exists(mapping):
        with open(mapping, encoding="utf-8") as f:
            if dict(l.rstrip("\n").split("\t", 1) for l in f if l.strip()) == names:
                return names
    os.makedirs(docs, exist_ok=True)
    for d in corpus:
        with open(os.path.join(docs, file_name(d["id"])), "w", encoding="utf-8") as f:
            f.write(d["title"] + "\n\n" + d["text"] if d["title"] else d["text"])
    with open(mapping, "w", encoding="utf-8") as f:
        f.writelines(f"{name}\t{doc_id}\n" for name, doc_id in names.items())
    return names


def run(cmd, **kw):
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    return subprocess.run(cmd, check=True, text=True, **kw)


def model_flag(args):
    return ["--model", args.model] if args.model else []


def index(args, work):
    started = time.perf_counter()
    out = run([args.bin, *model_flag(args), "--device", args.device, "index", os.path.join(work, "docs"), "--db", os.path.join(work, "index.db"),
               "--prune", "--json"], stdout=subprocess.PIPE).stdout
    report = json.loads(out.strip().splitlines()[-1])
    keep = ("documents_total", "documents_indexed", "documents_skipped", "documents_failed", "documents_pruned", "chunks",
            "chunks_embedded", "tokens", "seconds", "tokens_per_second")
    summary = {k: report.get(k) for k in keep}
    summary["wall_seconds"] = round(time.perf_counter() - started, 2)
    print(f"index: {summary}", file=sys.stderr)
    # The report of the run that last changed the index is the one that says what building it took.
    built = os.path.join(work, "index.json")
    if summary["documents_indexed"] or summary["documents_pruned"] or not os.path.exists(built):
        with open(built, "w") as f:
            json.dump(summary, f, indent=2)
    with open(built) as f:
        return json.load(f)


def search(args, work, queries_file, mode, rerank):
    cmd = [args.bin, *model_flag(args), "--device", args.device, "search", "--queries", queries_file, "--db", os.path.join(work, "index.db"), "--json",
           "--mode", mode, "-k", str(args.chunks)]
    if rerank:
        cmd += ["--rerank", str(rerank)] + (["--decoder", args.decoder] if args.decoder else [])
    started = time.perf_counter()
    out = run(cmd, stdout=subprocess.PIPE).stdout
    wall = time.perf_counter() - started
    return [json.loads(l) for l in out.splitlines() if l.strip()], wall


def documents(lines, names):
    """{query id: [doc id, ...]}: each document at its first hit, at most DOCS of them."""
    ranked = {}
    for line in lines:
        seen = []
        for hit in line["hits"]:
            doc_id = names[os.path.basename(hit["path"])]
            if doc_id not in seen:
                seen.append(doc_id)
        ranked[line["id"]] = seen[:DOCS]
    return ranked


def score(ranked, qrels, tag, trec_file):
    with open(trec_file, "w") as f:
        for qid, docs in ranked.items():
            f.writelines(f"{qid} Q0 {d} {r + 1} {DOCS - r} {tag}\n" for r, d in enumerate(docs))
    if ir_measures is None:
        return {}
    run_dict = {qid: {d: float(DOCS - r) for r, d in enumerate(docs)} for qid, docs in ranked.items()}
    agg = ir_measures.calc_aggregate(list(MEASURES.values()), qrels, run_dict)
    return {name: round(float(agg[m]), 4) for name, m in MEASURES.items()}


def machine():
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "crates"], capture_output=True,
                               text=True).stdout.strip()
    except OSError:  # no git (the GPU machine)
        commit, dirty = "", ""
    return {"cpu": cpu, "cpus": os.cpu_count(), "warpfold_commit": commit + ("+changes" if dirty else ""),
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d")}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("set_dir")
    p.add_argument("--modes", default="keyword,semantic,hybrid")
    p.add_argument("--limit", type=int, help="search only the first N queries (and score against theirs)")
    p.add_argument("--rerank", type=int, default=0, help="also run each mode with --rerank N")
    p.add_argument("--decoder", help="the chat model that reranks (a .gguf); default: warpfold's")
    p.add_argument("--chunks", type=int, default=400, help="hits (chunks) asked of warpfold per query")
    p.add_argument("--work")
    p.add_argument("--out", help="folder for <set>-<mode>.json")
    p.add_argument("--bin", default="./target/release/warpfold")
    p.add_argument("--device", default="cpu")
    p.add_argument("--index-only", action="store_true", help="write the documents and build the index, search nothing")
    p.add_argument("--index-built", action="store_true",
                   help="search WORK/index.db as it is (built elsewhere, e.g. on the GPU machine: bench/gpu/run-indexes.sh)")
    p.add_argument("--model", help="embedding model (a pinned name such as multilingual-e5-small, or a folder); "
                   "default: warpfold's own. Its index goes to SET_DIR/warpfold-MODEL and its results to <set>-MODEL-<mode>.json")
    args = p.parse_args()

    set_name = os.path.basename(os.path.normpath(args.set_dir))
    model_tag = os.path.basename(os.path.normpath(args.model)) if args.model else ""
    work = args.work or os.path.join(args.set_dir, "warpfold" + (f"-{model_tag}" if model_tag else ""))
    os.makedirs(work, exist_ok=True)
    corpus = load_jsonl(os.path.join(args.set_dir, "corpus.jsonl"))
    queries = load_jsonl(os.path.join(args.set_dir, "queries.jsonl"))
    qrels = list(ir_measures.read_trec_qrels(os.path.join(args.set_dir, "qrels.tsv"))) if ir_measures else []
    queries_file = os.path.join(args.set_dir, "queries.jsonl")
    suffix = ""
    if args.limit:
        queries = queries[:args.limit]
        suffix = f"-first{args.limit}"
        queries_file = os.path.join(work, f"queries{suffix}.jsonl")
        with open(queries_file, "w", encoding="utf-8") as f:
            f.writelines(json.dumps({"id": q["id"], "text": q["text"]}) + "\n" for q in queries)
        wanted = {q["id"] for q in queries}
        qrels = [q for q in qrels if q.query_id in wanted]

    if args.index_built:
        names = doc_names(corpus)
        with open(os.path.join(work, "index.json")) as f:
            indexed = json.load(f)
    else:
        names = write_docs(corpus, work)
        indexed = index(args, work)
    if args.index_only:
        return
    about = machine()
    rows = []
    for mode in args.modes.split(","):
        for rerank in ([0, args.rerank] if args.rerank else [0]):
            label = mode + (f"-rerank{rerank}" if rerank else "")
            lines, wall = search(args, work, queries_file, mode, rerank)
            ranked = documents(lines, names)
            res = score(ranked, qrels, f"warpfold-{label}", os.path.join(work, f"run-{label}{suffix}.trec"))
            pairs = sum(1 for l in lines for h in l["hits"] if "relevance" in h)
            rerank_s = sum(l.get("rerank_ms", 0) for l in lines) / 1e3
            docs_per_query = [len(d) for d in ranked.values()]
            res.update(
                set=set_name,
                mode=label,
                queries=len(queries),
                documents=len(corpus),
                qrels=len(qrels),
                queries_without_results=sum(1 for d in docs_per_query if not d),
                queries_under_100_documents=sum(1 for d in docs_per_query if d < DOCS),
                chunks_asked=args.chunks,
                search_ms_per_query=round(sum(l["search_ms"] for l in lines) / max(len(lines), 1), 2),
                command_seconds=round(wall, 2),
            )
            if rerank:
                res.update(reranked_per_query=rerank, rerank_pairs=pairs, rerank_seconds=round(rerank_s, 1),
                           rerank_pairs_per_second=round(pairs / rerank_s, 2) if rerank_s else None)
            res.update(index=indexed, model=args.model or "default", **about)
            rows.append(res)
            if args.out:
                os.makedirs(args.out, exist_ok=True)
                name = f"{set_name}-{model_tag}" if model_tag else set_name
                with open(os.path.join(args.out, f"{name}-{label}{suffix}.json"), "w") as f:
                    json.dump(res, f, indent=2)
                    f.write("\n")

    print(f"\n{set_name}{suffix}: {len(queries)} queries, {len(corpus)} documents")
    print("| mode | nDCG@10 | MRR@10 | recall@10 | recall@100 | ms/query | pairs/s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    measure = lambda r, m: f"{r[m]:.4f}" if m in r else "(not scored)"
    for r in rows:
        print(f"| {r['mode']} | {measure(r, 'nDCG@10')} | {measure(r, 'MRR@10')} | {measure(r, 'recall@10')} | {measure(r, 'recall@100')} "
              f"| {r['search_ms_per_query']:.1f} | {r.get('rerank_pairs_per_second') or ''} |")


if __name__ == "__main__":
    main()
