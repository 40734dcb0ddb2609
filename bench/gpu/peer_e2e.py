"""The end-to-end pipeline a user would write with the Python libraries, as the peer of warpfold's app
core (issue 15 item 5): a folder of PDFs in, every document's text extracted (pypdf), cut into chunks
of about 200 words and embedded with sentence-transformers (all-MiniLM-L6-v2, batch 256), and every
document summarized whole with transformers' batched `generate` exactly as bench/gpu/peer_summarize.py
does (whose functions this shares): the same GGUF dequantized to bf16, warpfold's system prompt and
detailed whole-document instruction, greedy, repetition penalty 1.1, 160 new tokens, length-sorted
batches under a padded-token budget, left padding, SDPA.

    python3 peer_e2e.py MODEL.gguf PDF_DIR ST_MODEL_DIR OUT.jsonl [--memory-gib 8] [--resume]
        [--cache /tmp/qwen-bf16] [--deadline SECONDS] [--batch 16] [--batch-tokens 65536]
        [--max-new-tokens 160] [--chunk-words 200] [--embed-batch 256] [--dry-run]

Built for a device whose calls end at 10 minutes:
- OUT.jsonl gets one line per summary, {"path", "summary", "tokens_in", "tokens_out"}, as each batch
  finishes (flushed), and OUT.jsonl.state.json the stage timings so far, rewritten after every stage
  and batch; the last line on stdout is the timings as JSON.
- `--resume` keeps the summaries already in OUT.jsonl and the stages already timed in the state file:
  extraction is redone (the prompts need the text; its time is reported as `resume_extract_seconds`,
  not counted again), embedding is not, and only the documents without a summary are batched.
- `--deadline S` starts no new batch once S seconds have passed since the start, so a call ends on its
  own with what it finished (the next one resumes); no work is cut off and lost.
- `--cache DIR`: the first load dequantizes the GGUF (about 65 s) and saves the bf16 model there;
  later loads (a resumed call, the capped run) read it (seconds). Each call's load is reported apart.
- `--text-cache FILE`: the extracted texts and the extraction's seconds are kept there; a later call
  (a resumed one, or the capped run: pypdf runs on the CPU, whatever the GPU's cap) takes both from it
  instead of extracting again (`extract_seconds_from` says so).
- `--dry-run`: extraction and chunking only (no torch), for checking on a machine without a GPU.

Documents per minute are computed on the summarizing time (the sum over calls); the time until every
document is done is extract + embed + summarize, reported with and without the model loads.
"""
import argparse
import json
import os
import resource
import sys
import time


def extract(folder):
    """Every PDF's text (pages joined by blank lines) and page count, as a user's script reads them."""
    from pypdf import PdfReader

    docs = []
    for name in sorted(os.listdir(folder)):
        if not name.lower().endswith(".pdf"):
            continue
        path = os.path.join(folder, name)
        reader = PdfReader(path)
        pages = [page.extract_text() or "" for page in reader.pages]
        docs.append({"path": path, "pages": len(pages), "text": "\n\n".join(pages)})
    return docs


def chunks_of(text, words=200):
    """Consecutive runs of about `words` words."""
    w = text.split()
    return [" ".join(w[i:i + words]) for i in range(0, len(w), words)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gguf")
    ap.add_argument("pdfs")
    ap.add_argument("st_model")
    ap.add_argument("out")
    ap.add_argument("--memory-gib", type=float)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--cache")
    ap.add_argument("--deadline", type=float)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--batch-tokens", type=int, default=65536)
    ap.add_argument("--max-new-tokens", type=int, default=160)
    ap.add_argument("--chunk-words", type=int, default=200)
    ap.add_argument("--embed-batch", type=int, default=256)
    ap.add_argument("--style", default="detailed")
    ap.add_argument("--text-cache")
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    started = time.time()
    state_path = args.out + ".state.json"
    state = {"calls": []}
    done = {}
    if args.resume:
        if os.path.exists(state_path):
            state = json.load(open(state_path))
        if os.path.exists(args.out):
            for line in open(args.out):
                if line.strip():
                    r = json.loads(line)
                    done[r["path"]] = r
    else:
        for p in (args.out, state_path):
            if os.path.exists(p):
                os.remove(p)
    call = {"started": started, "summarized": 0}
    state["calls"].append(call)

    def save():
        with open(state_path + ".tmp", "w") as f:
            json.dump(state, f, indent=1)
        os.replace(state_path + ".tmp", state_path)

    def log(msg):
        print(f"[{time.time() - started:7.1f} s] {msg}", flush=True)

    # 1. Text, 2. chunks.
    if args.text_cache and os.path.exists(args.text_cache):
        cached = json.load(open(args.text_cache))
        docs = cached["docs"]
        if "extract_seconds" not in state:
            state["extract_seconds"] = cached["extract_seconds"]
            state["extract_seconds_from"] = args.text_cache
    else:
        t = time.time()
        docs = extract(args.pdfs)
        extract_s = time.time() - t
        if "extract_seconds" in state:
            call["resume_extract_seconds"] = extract_s
        else:
            state["extract_seconds"] = extract_s
        if args.text_cache:
            with open(args.text_cache + ".tmp", "w") as f:
                json.dump({"extract_seconds": extract_s, "docs": docs}, f)
            os.replace(args.text_cache + ".tmp", args.text_cache)
    extract_s = state["extract_seconds"]
    t = time.time()
    chunks = [c for d in docs for c in chunks_of(d["text"], args.chunk_words)]
    state.setdefault("chunk_seconds", time.time() - t)
    state.update(documents=len(docs), pages=sum(d["pages"] for d in docs), words=sum(len(d["text"].split()) for d in docs),
                 chunks=len(chunks), empty_documents=sum(1 for d in docs if not d["text"].strip()))
    log(f"extracted {len(docs)} PDFs, {state['pages']} pages, {state['words']} words, {len(chunks)} chunks in {extract_s:.1f} s")
    save()
    if args.dry_run:
        print(json.dumps({k: v for k, v in state.items() if k != "calls"}))
        return

    t = time.time()
    import sentence_transformers  # noqa: F401  (imported here to count its import with torch's)
    import torch

    import peer_summarize as ps

    state.setdefault("import_seconds", time.time() - t)

    ps.cap_memory(args.memory_gib)
    state.update(system=f"transformers {__import__('transformers').__version__}, sentence-transformers "
                 f"{__import__('sentence_transformers').__version__}, torch {torch.__version__}, pypdf {__import__('pypdf').__version__}",
                 memory_gib_cap=args.memory_gib, gpu=torch.cuda.get_device_name(0))

    # 3. Embeddings (once: a resumed call has them).
    if "embed_seconds" not in state:
        from sentence_transformers import SentenceTransformer

        t = time.time()
        # The carried folder holds f16 weights (bench/gpu/to_f16.py); loaded as f32, as the published
        # f32 checkpoint runs for a user (the weights rounded to f16, nothing else).
        try:
            st = SentenceTransformer(args.st_model, device="cuda", model_kwargs={"dtype": torch.float32})
        except Exception as e:  # a release that takes no such model_kwargs: f32 by hand
            print(f"peer: SentenceTransformer(model_kwargs=dtype) failed ({e}); loading and casting to f32", file=sys.stderr)
            st = SentenceTransformer(args.st_model, device="cuda").float()
        state["embed_dtype"] = str(next(st.parameters()).dtype)
        torch.cuda.synchronize()
        state["embed_load_seconds"] = time.time() - t
        t = time.time()
        emb = st.encode(chunks, batch_size=args.embed_batch, convert_to_numpy=True)
        torch.cuda.synchronize()
        state["embed_seconds"] = time.time() - t
        state["t_embed_end"] = time.time()
        state["embedding_shape"] = list(emb.shape)
        state["embed_tokens"] = sum(len(x) for x in st.tokenizer(chunks, truncation=True, max_length=st.max_seq_length)["input_ids"])
        del st, emb
        torch.cuda.empty_cache()
        log(f"embedded {len(chunks)} chunks ({state['embed_tokens']} tokens) in {state['embed_seconds']:.1f} s "
            f"(model load {state['embed_load_seconds']:.1f} s)")
        save()

    # 4. The chat model, 5. summaries.
    call["t_load_start"] = time.time()
    tok, model, info = ps.load(args.gguf, args.cache)
    call.update(info)
    call["t_load_end"] = time.time()
    log(f"chat model loaded in {info['load_seconds']:.1f} s from {info['load_from']}"
        + (f", cache saved in {info['cache_save_seconds']:.1f} s" if info.get("cache_save_seconds") else ""))
    save()
    todo = [d for d in docs if d["path"] not in done]
    prompts, ids = ps.prompts_for(tok, [d["text"] for d in todo], args.style)
    state["prompt_tokens_todo_at_call_start"] = sum(map(len, ids))
    if not done:
        state["prompt_tokens"] = sum(map(len, ids))
    batches = ps.make_batches([len(x) for x in ids], args.batch, args.batch_tokens)
    gen = ps.Generator(tok, model, prompts, args.max_new_tokens)
    call["batches_planned"] = len(batches)
    log(f"{len(todo)} documents to summarize ({len(done)} done before), {sum(map(len, ids))} prompt tokens, {len(batches)} batches")
    t_sum = time.time()
    call["summarize_seconds"] = 0.0
    with open(args.out, "a") as out:
        for b, group in enumerate(batches):
            if args.deadline and time.time() - started > args.deadline:
                call["stopped_at_deadline"] = True
                log(f"deadline: {len(batches) - b} batches left for a resumed call")
                break
            t = time.time()
            results = gen.run(group)
            torch.cuda.synchronize()
            for i in group:
                summary, n = results[i]
                out.write(json.dumps({"path": todo[i]["path"], "summary": summary, "tokens_in": len(ids[i]), "tokens_out": n}) + "\n")
            out.flush()
            call["summarized"] += len(group)
            call["tokens_out"] = call.get("tokens_out", 0) + sum(results[i][1] for i in group)
            call["summarize_seconds"] = time.time() - t_sum
            call["t_end"] = time.time()
            call["oom_splits"] = gen.splits
            call["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
            save()
            log(f"batch {b + 1}/{len(batches)}: {len(group)} documents, width {len(ids[group[0]])}, {time.time() - t:.1f} s; "
                f"{len(done) + call['summarized']}/{len(docs)} summarized")
    call["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
    call["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    call["seconds"] = time.time() - started
    call["t_end"] = time.time()
    # Totals over every call so far.
    calls = state["calls"]
    summarized = sum(c.get("summarized", 0) for c in calls)
    summarize_s = sum(c.get("summarize_seconds", 0.0) for c in calls)
    loads = [c["load_seconds"] for c in calls if "load_seconds" in c]
    pipeline = (state["extract_seconds"] + state["chunk_seconds"] + state.get("import_seconds", 0) + state.get("embed_load_seconds", 0)
                + state.get("embed_seconds", 0) + summarize_s)
    state["totals"] = {
        "documents_summarized": summarized,
        "all_done": summarized >= len(docs),
        "summarize_seconds": summarize_s,
        "documents_per_minute": 60 * summarized / summarize_s if summarize_s else None,
        "tokens_out": sum(c.get("tokens_out", 0) for c in calls),
        "generated_tokens_per_second": sum(c.get("tokens_out", 0) for c in calls) / summarize_s if summarize_s else None,
        "chat_model_loads_seconds": loads,
        "chat_model_loads_from": [c["load_from"] for c in calls if "load_from" in c],
        "until_all_done_seconds_without_chat_load": pipeline,
        # With one load: the first call's (from the GGUF, or from the bf16 cache an earlier run saved:
        # chat_model_loads_from says which).
        "until_all_done_seconds_with_first_load": pipeline + (loads[0] if loads else 0),
        "documents_per_minute_end_to_end_with_first_load": 60 * summarized / (pipeline + (loads[0] if loads else 0)),
        "oom_splits": sum(c.get("oom_splits", 0) for c in calls),
        "peak_gib": max((c.get("peak_gib", 0) for c in calls), default=None),
        "calls": len(calls),
    }
    save()
    print(json.dumps({k: v for k, v in state.items() if k != "calls"} | {"this_call": call}))


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
