"""The question-answering peer of `warpfold ask --questions` on the CPU, with llama.cpp for the
answers: bench/gpu/peer_qa.py's pipeline (whose functions this imports) with its generation moved
from transformers on the GPU to `llama-server` on the same cores as warpfold, so the two can be timed
and scored on one machine.

Retrieval is peer_qa.py's, on the CPU: the QA set's documents cut into passages of about 200 words
(each keeps its document and page), embedded with sentence-transformers (all-MiniLM-L6-v2,
normalized), the best `--passages` of them by cosine (numpy is the vector store). Each question gets
ONE prompt holding those passages numbered [1]..[k] with their file and page (peer_qa.prompt), under
warpfold's system prompt for answers and with its refusal sentence (peer_qa.SYSTEM, NOT_FOUND).

The answers come from llama.cpp's own server (bench/llamacpp/build.sh builds it; its Server class in
bench/llamacpp/summarize_folder.py starts and stops it) at llama.cpp's best settings: threads = cores,
P parallel slots with continuous batching, every question submitted at once from P client threads.
Each request goes to /completion with the model's ChatML prompt written out, the same text
peer_qa.py gets from the tokenizer's chat template (system, user, then the assistant's turn opened);
the script checks it once against the server's own rendering of the GGUF's template
(/apply-template, what /v1/chat/completions would send) and records whether they are the same.
Greedy (temperature 0), no repetition penalty (`warpfold ask`'s sampling), 160 new tokens, no prompt
cache (the server runs with --cache-ram 0 --no-cache-prompt, as summarize_folder.py's does), so no
question reuses another's prefill.

    /tmp/venv-st/bin/python bench/qa/peer_llamacpp.py MODEL.gguf EMBEDDER_DIR PAGES.jsonl QUESTIONS.jsonl
        OUT.jsonl [--passages 5] [--max-new-tokens 160] [--limit N] [--parallel 8] [--threads T]
        [--cpus 0,1] [--slot-ctx 4096] [--chunk-words 200] [--embed-batch 256] [--server-arg=X ...]

PAGES.jsonl and QUESTIONS.jsonl are as for peer_qa.py (what the qa_documents example writes, and
tests/data/qa/questions.jsonl or some of its lines). OUT.jsonl gets peer_qa.py's lines, one per
question: its own fields and "answer", "citations", "answerable", "passages", "prompt_tokens"
(tokens the server evaluated) and "output_tokens" (tokens it predicted), which bench/qa/score.py
scores as it does warpfold's. The server's log goes to OUT.llama-server.log.

The last line on stdout is the timings as JSON, as peer_qa.py prints them: the embedder's load and
the passages' embedding (the index), retrieval (the questions embedded and the top k found), the
chat model's load (llama-server started until its /health says ok), generation (first question sent
to last answer in, all questions through P slots), first_token_seconds and single_answer_seconds
(the first question alone on the idle server, after one untimed 4-token warm-up, streamed: from
sending it to its first token and to its last) and questions per second (over retrieval and
generation, and over generation alone). The embedder is dropped before the server starts, so the two
never share the cores.
"""
import argparse
import json
import os
import queue
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request


HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "gpu"))
sys.path.insert(0, os.path.join(ROOT, "bench", "llamacpp"))
import peer_qa as qa  # noqa: E402
import summarize_folder as sf  # noqa: E402


def chatml(user):
    """The prompt text peer_qa.py builds with the tokenizer's chat template (Qwen2.5's, ChatML, with a
    system message given): system, user, and the assistant's turn opened."""
    return (f"<|im_start|>system\n{qa.SYSTEM}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n"
            "<|im_start|>assistant\n")


def body(args, text, n_predict, stream=False):
    return {"prompt": text, "n_predict": n_predict, "temperature": 0, "repeat_penalty": 1.0, "seed": args.seed,
            "cache_prompt": False, "stream": stream}


def complete(server, args, text, n_predict):
    _, r = sf.http_json(server.url + "/completion", body(args, text, n_predict))
    return r


def streamed(server, args, text, n_predict):
    """One request streamed: (seconds to the first token, seconds to the end, answer, last event)."""
    req = urllib.request.Request(server.url + "/completion", data=json.dumps(body(args, text, n_predict, True)).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.time()
    first, parts, last = None, [], {}
    with urllib.request.urlopen(req, timeout=3600) as r:
        for raw in r:
            line = raw.decode("utf-8").strip()
            if not line.startswith("data:"):
                continue
            event = json.loads(line[5:])
            if first is None:
                first = time.time() - t0
            parts.append(event.get("content", ""))
            last = event
            if event.get("stop"):
                break
    return first, time.time() - t0, "".join(parts).strip(), last


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gguf")
    ap.add_argument("embedder")
    ap.add_argument("pages")
    ap.add_argument("questions")
    ap.add_argument("out")
    ap.add_argument("--passages", type=int, default=5)
    ap.add_argument("--max-new-tokens", type=int, default=160)
    ap.add_argument("--limit", type=int, help="only the first N questions")
    ap.add_argument("--parallel", type=int, default=8, help="llama-server slots P (and client threads)")
    ap.add_argument("--threads", type=int, help="llama-server threads (default: the --cpus count, else all cores)")
    ap.add_argument("--cpus", help="run llama-server under taskset -c CPUS (e.g. 0,1)")
    ap.add_argument("--slot-ctx", type=int, default=4096, help="context tokens per slot (prompts are ~1,500)")
    ap.add_argument("--chunk-words", type=int, default=200)
    ap.add_argument("--embed-batch", type=int, default=256)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--server-bin", default=os.path.join(ROOT, "bench", "llamacpp", "bin", "llama-server"))
    ap.add_argument("--server-arg", action="append", default=[], help="extra llama-server argument (repeat)")
    args = ap.parse_args()
    if args.threads is None:
        args.threads = len(sf.cpu_list(args.cpus)) if args.cpus else os.cpu_count()
    # What summarize_folder.Server reads from its arguments.
    args.model, args.port, args.cache_prompt = args.gguf, 0, False

    docs = qa.documents(args.pages)
    passages = qa.passages_of(docs, args.chunk_words)
    asked = [json.loads(l) for l in open(args.questions, encoding="utf-8") if l.strip()][:args.limit]
    print(f"peer: {len(docs)} documents, {sum(len(d['pages']) for d in docs)} pages, {len(passages)} passages, "
          f"{len(asked)} questions", file=sys.stderr)

    # The index: the passages embedded (on the CPU).
    t = time.time()
    st = qa.embedder(args.embedder, "cpu")
    embed_load_s = time.time() - t
    t = time.time()
    vectors = qa.embed_passages(st, passages, args.embed_batch)
    embed_s = time.time() - t

    # Retrieval: the questions embedded, cosine against every passage, the best k (as peer_qa.py).
    t = time.time()
    found = qa.nearest(st, vectors, passages, [a["question"] for a in asked], args.passages, args.embed_batch)
    retrieval_s = time.time() - t
    del st

    users = [qa.prompt(a["question"], p) for a, p in zip(asked, found)]
    prompts = [chatml(u) for u in users]

    # The chat model: llama-server, P slots, threads = cores.
    log_path = os.path.splitext(os.path.abspath(args.out))[0] + ".llama-server.log"
    server = sf.Server(args, args.parallel, log_path)
    version = subprocess.run([args.server_bin, "--version"], capture_output=True, text=True)
    results = [None] * len(asked)
    try:
        server.start()
        load_s = server.start_s
        props = server.props() or {}
        try:  # the server's own rendering of the GGUF's chat template, for the first question
            _, applied = sf.http_json(server.url + "/apply-template", {"messages": [
                {"role": "system", "content": qa.SYSTEM}, {"role": "user", "content": users[0]}]})
            template_same = applied.get("prompt") == prompts[0]
        except Exception as e:  # noqa: BLE001 - informational only
            template_same = f"unknown: {e}"
        if template_same is not True:
            print(f"peer: WARNING the server's chat template renders another prompt ({template_same})", file=sys.stderr)

        complete(server, args, "<|im_start|>user\nWarm-up.<|im_end|>\n<|im_start|>assistant\n", 4)  # untimed
        first_s, single_s, single_answer, single_last = streamed(server, args, prompts[0], args.max_new_tokens)
        print(f"peer: one question alone: first token {first_s:.2f} s, answer {single_s:.2f} s", file=sys.stderr)

        # Every question, P at a time, continuous batching in the server.
        work = queue.Queue()
        for i in range(len(asked)):
            work.put(i)

        def client():
            while True:
                try:
                    i = work.get_nowait()
                except queue.Empty:
                    return
                try:
                    results[i] = complete(server, args, prompts[i], args.max_new_tokens)
                except Exception as e:  # noqa: BLE001 - recorded, the run goes on
                    detail = e.read().decode(errors="replace")[:500] if isinstance(e, urllib.error.HTTPError) else ""
                    results[i] = {"error": f"{e} {detail}".strip()}
                    print(f"peer: {asked[i]['id']}: {results[i]['error']}", file=sys.stderr)

        threads = [threading.Thread(target=client) for _ in range(min(args.parallel, len(asked)))]
        load0 = sf.loadavg()
        t_gen = time.time()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        gen_s = time.time() - t_gen
        load1 = sf.loadavg()
    finally:
        server.stop()

    answers = []
    with open(args.out, "w", encoding="utf-8") as f:
        for a, p, r in zip(asked, found, results):
            answer = (r.get("content") or "").strip()
            answers.append(answer)
            refused = qa.is_refusal(answer)
            line = dict(a)
            line.update(answer=answer, citations=[] if refused else qa.cited(answer, p), answerable=not refused,
                        passages=p, prompt_tokens=r.get("tokens_evaluated"), output_tokens=r.get("tokens_predicted"))
            if "error" in r:
                line["error"] = r["error"]
            f.write(json.dumps(line, ensure_ascii=False) + "\n")

    n = len(asked)
    ok = [r for r in results if "error" not in r]
    st_mod = sys.modules.get("sentence_transformers")
    print(json.dumps({
        "system": f"llama.cpp {' '.join((version.stdout + version.stderr).strip().splitlines()[-2:])}, "
                  f"sentence-transformers {st_mod.__version__ if st_mod else '?'}, torch {qa.torch.__version__}",
        "device": sf.cpu_name(), "cores": os.cpu_count(), "threads": args.threads, "cpus": args.cpus,
        "parallel": args.parallel, "slot_ctx": args.slot_ctx, "server_command": " ".join(server.cmd),
        "server_build": props.get("build_info"), "template_same_as_server": template_same,
        "model": os.path.basename(args.gguf), "questions": n, "documents": len(docs), "passages_indexed": len(passages),
        "passages_per_question": args.passages, "errors": n - len(ok),
        "embed_load_seconds": embed_load_s, "embed_seconds": embed_s, "retrieval_seconds": retrieval_s,
        "load_seconds": load_s, "load_from": "llama-server start to /health ok (mmap of the GGUF, weights repacked)",
        "generation_seconds": gen_s,
        "first_token_seconds": first_s, "single_answer_seconds": single_s,
        "first_token_method": "the first question alone on the idle server (after a 4-token warm-up), streamed "
                              "/completion: request sent to first token, and to the last",
        "single_prompt_tokens": single_last.get("tokens_evaluated"),
        "single_output_tokens": single_last.get("tokens_predicted"),
        "single_decode_tokens_per_s": (single_last.get("timings") or {}).get("predicted_per_second"),
        "single_prompt_tokens_per_s": (single_last.get("timings") or {}).get("prompt_per_second"),
        "single_same_as_batched": single_answer == answers[0],
        "questions_per_second": n / (retrieval_s + gen_s), "questions_per_second_generation": n / gen_s,
        "prompt_tokens": sum(r.get("tokens_evaluated") or 0 for r in ok),
        "generated_tokens": sum(r.get("tokens_predicted") or 0 for r in ok),
        "stopped_at_max_tokens": sum(1 for r in ok if r.get("stop_type") == "limit"),
        "refusals": sum(qa.is_refusal(a) for a in answers),
        "loadavg_before": load0, "loadavg_after": load1,
    }))


if __name__ == "__main__":
    main()
