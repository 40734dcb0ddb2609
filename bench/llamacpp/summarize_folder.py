#!/usr/bin/env python3
"""llama.cpp as the CPU peer of warpfold's summarizer: the same GGUF file, the same cores, llama.cpp's
own best settings (threads = cores, its server's parallel slots and continuous batching).

For each configuration it starts `llama-server` on the model, waits for /health, and sends one chat
request per document to /v1/chat/completions from P client threads (P = the server's slots):

    system: "You are a helpful assistant that writes short, faithful summaries of documents."
    user:   INSTRUCTION + "\\n\\n" + document text
    max_tokens 256, temperature 0 (greedy), fixed seed, cache_prompt false

The server runs with --cache-ram 0 and every request asks for cache_prompt false, so no document
reuses another's prompt cache (not even the shared system prompt); `--cache-prompt` turns
llama.cpp's prompt cache back on.

Writes one JSON line per configuration to stdout and appends it to --out:

    {"kind": "llama-bench", ...}   `llama-bench -m MODEL -t THREADS -p 512 -n 128 -o json`
    {"kind": "single", ...}        P=1, one document: the server's decode and prompt tokens/s
    {"kind": "folder", ...}        one per P: wall seconds, documents/min, prompt and completion
                                   tokens (from the usage field)

Usage (from the repository root):

    python3 bench/llamacpp/summarize_folder.py --model MODEL.gguf --out results.jsonl \\
        [--cpus 0,1] [--threads N] [--parallel 1,4,8,16 | --sweep] [--limit N] [--slot-ctx 8192] \\
        [--instruction TEXT] [--max-tokens 256] [--seed 42] [--repeat-penalty 1.0] \\
        [--no-bench] [--bench-reps 5] [--no-single] [--summaries summaries.jsonl]

Standard library only.
"""
import argparse
import datetime
import json
import os
import platform
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

SYSTEM = "You are a helpful assistant that writes short, faithful summaries of documents."
INSTRUCTION = (
    "Summarize the following document in one paragraph. Begin with one sentence on what it is about, "
    "then state every name, date, number and amount it gives, each with what it refers to, written exactly as stated."
)
SWEEP = [1, 4, 8, 16]


def log(*a):
    print("llamacpp:", *a, file=sys.stderr, flush=True)


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def cpu_list(spec):
    cpus = set()
    for part in spec.split(","):
        a, _, b = part.partition("-")
        cpus.update(range(int(a), int(b or a) + 1))
    return sorted(cpus)


def loadavg():
    try:
        return list(os.getloadavg())
    except OSError:
        return None


def load_documents(path, limit, include_scans):
    docs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            d = json.loads(line)
            if d.get("scan") and not include_scans:
                continue
            if not d.get("text"):
                continue
            docs.append({"id": d.get("id", str(len(docs))), "text": d["text"]})
    return docs[:limit] if limit else docs


def pin(args):
    """`taskset -c CPUS` when --cpus is given: the cores the engine's own runs are pinned to."""
    return ["taskset", "-c", args.cpus] if args.cpus else []


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_json(url, body=None, timeout=3600):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, json.loads(r.read().decode() or "null")


class Server:
    """llama-server on the model with P slots of `slot_ctx` tokens each."""

    def __init__(self, args, parallel, log_path):
        self.port = args.port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.cmd = pin(args) + [
            args.server_bin, "-m", args.model,
            "--threads", str(args.threads), "--threads-batch", str(args.threads),
            "--parallel", str(parallel), "--cont-batching",
            "--ctx-size", str(parallel * args.slot_ctx),
            "--host", "127.0.0.1", "--port", str(self.port),
            "--seed", str(args.seed),
            "--temp", "0",
        ]
        if not args.cache_prompt:
            self.cmd += ["--cache-ram", "0", "--no-cache-prompt"]
        self.cmd += args.server_arg
        self.log_path = log_path
        self.proc = None

    def start(self, timeout=600):
        log("starting", " ".join(self.cmd))
        self.log_file = open(self.log_path, "w")
        t0 = time.time()
        # Its own process group, so that stopping it ends nothing else.
        self.proc = subprocess.Popen(self.cmd, stdout=self.log_file, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        while time.time() - t0 < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama-server exited with {self.proc.returncode}; see {self.log_path}")
            try:
                status, body = http_json(self.url + "/health", timeout=5)
                if status == 200 and (body or {}).get("status") == "ok":
                    self.start_s = time.time() - t0
                    return self
            except (urllib.error.URLError, ConnectionError, socket.timeout, json.JSONDecodeError):
                pass
            time.sleep(0.2)
        raise RuntimeError(f"llama-server not healthy after {timeout} s; see {self.log_path}")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            self.log_file.close()

    def props(self):
        try:
            return http_json(self.url + "/props", timeout=10)[1]
        except Exception:  # noqa: BLE001 - informational only
            return None

    def chat(self, args, text, max_tokens=None):
        body = {
            "messages": [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": args.instruction + "\n\n" + text},
            ],
            "max_tokens": max_tokens or args.max_tokens,
            "temperature": 0,
            "seed": args.seed,
            "stream": False,
            "cache_prompt": bool(args.cache_prompt),
        }
        if args.repeat_penalty is not None:
            body["repeat_penalty"] = args.repeat_penalty
        t0 = time.time()
        _, r = http_json(self.url + "/v1/chat/completions", body)
        return r, time.time() - t0


def run_folder(server, args, docs, parallel):
    """All documents through the server from `parallel` client threads; returns the result line and
    the summaries."""
    work = queue.Queue()
    for i, d in enumerate(docs):
        work.put((i, d))
    results = [None] * len(docs)

    def client():
        while True:
            try:
                i, d = work.get_nowait()
            except queue.Empty:
                return
            try:
                r, s = server.chat(args, d["text"])
                results[i] = {"id": d["id"], "seconds": s, "response": r}
            except Exception as e:  # noqa: BLE001 - recorded, the run goes on
                detail = e.read().decode(errors="replace")[:500] if isinstance(e, urllib.error.HTTPError) else ""
                results[i] = {"id": d["id"], "error": f"{e} {detail}".strip()}

    threads = [threading.Thread(target=client) for _ in range(parallel)]
    load0 = loadavg()
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.time() - t0

    ok = [r for r in results if "response" in r]
    errors = [{"id": r["id"], "error": r["error"]} for r in results if "error" in r]
    usage = [r["response"].get("usage", {}) for r in ok]
    timings = [r["response"].get("timings", {}) for r in ok]
    finish = [r["response"]["choices"][0].get("finish_reason") for r in ok]
    prompt_tokens = sum(u.get("prompt_tokens", 0) for u in usage)
    completion_tokens = sum(u.get("completion_tokens", 0) for u in usage)
    line = {
        "kind": "folder",
        "parallel": parallel,
        "documents": len(docs),
        "ok": len(ok),
        "errors": errors,
        "wall_s": round(wall, 3),
        "docs_per_min": round(60 * len(ok) / wall, 3) if wall > 0 else None,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "completion_tokens_per_s": round(completion_tokens / wall, 3) if wall > 0 else None,
        "total_tokens_per_s": round((prompt_tokens + completion_tokens) / wall, 3) if wall > 0 else None,
        "stopped_at_max_tokens": sum(1 for f in finish if f == "length"),
        "prompt_tokens_from_cache": sum(t.get("cache_n", 0) for t in timings),
        "request_s_mean": round(sum(r["seconds"] for r in ok) / len(ok), 3) if ok else None,
        "request_s_max": round(max(r["seconds"] for r in ok), 3) if ok else None,
        "loadavg_before": load0,
        "loadavg_after": loadavg(),
    }
    summaries = [{
        "id": r["id"],
        "summary": r["response"]["choices"][0]["message"].get("content"),
        "finish_reason": r["response"]["choices"][0].get("finish_reason"),
        "prompt_tokens": r["response"].get("usage", {}).get("prompt_tokens"),
        "completion_tokens": r["response"].get("usage", {}).get("completion_tokens"),
        "seconds": round(r["seconds"], 3),
    } for r in ok]
    return line, summaries


def run_single(server, args, doc):
    """One document alone (P=1): the server's own timings of prompt processing and decoding."""
    r, s = server.chat(args, doc["text"])
    t = r.get("timings", {})
    u = r.get("usage", {})
    return {
        "kind": "single",
        "parallel": 1,
        "document": doc["id"],
        "wall_s": round(s, 3),
        "prompt_tokens": u.get("prompt_tokens"),
        "completion_tokens": u.get("completion_tokens"),
        "prompt_tokens_per_s": t.get("prompt_per_second"),
        "decode_tokens_per_s": t.get("predicted_per_second"),
        "prompt_ms": t.get("prompt_ms"),
        "decode_ms": t.get("predicted_ms"),
        "prompt_n": t.get("prompt_n"),
        "decode_n": t.get("predicted_n"),
        "cache_n": t.get("cache_n"),
        "finish_reason": r["choices"][0].get("finish_reason"),
        "loadavg_after": loadavg(),
    }


def run_llama_bench(args):
    cmd = pin(args) + [args.bench_bin, "-m", args.model, "-t", str(args.threads), "-p", "512", "-n", "128",
           "-r", str(args.bench_reps), "-o", "json"]
    log("running", " ".join(cmd))
    load0 = loadavg()
    p = subprocess.run(cmd, capture_output=True, text=True)
    line = {"kind": "llama-bench", "command": " ".join(cmd), "returncode": p.returncode,
            "loadavg_before": load0, "loadavg_after": loadavg()}
    try:
        rows = json.loads(p.stdout)
        line["results"] = rows
        line["summary"] = {
            ("pp%d" % r["n_prompt"] if r.get("n_prompt") else "tg%d" % r["n_gen"]):
                {"avg_ts": r.get("avg_ts"), "stddev_ts": r.get("stddev_ts")}
            for r in rows
        }
    except (json.JSONDecodeError, KeyError, TypeError):
        line["stdout"] = p.stdout[-4000:]
        line["stderr"] = p.stderr[-4000:]
    return line


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="GGUF file")
    ap.add_argument("--docs", default=os.path.join(ROOT, "tests/data/facts/documents.jsonl"),
                    help="JSON lines with a `text` field (default: tests/data/facts/documents.jsonl)")
    ap.add_argument("--limit", type=int, default=0, help="only the first N documents")
    ap.add_argument("--include-scans", action="store_true", help="keep documents marked scan")
    ap.add_argument("--cpus", default=None, help="run llama.cpp under taskset -c CPUS (e.g. 0,1)")
    ap.add_argument("--threads", type=int, default=None,
                    help="threads (default: the --cpus count, else all cores)")
    ap.add_argument("--parallel", default="1", help="comma-separated slot counts P (default: 1)")
    ap.add_argument("--sweep", action="store_true", help="P in 1,4,8,16")
    ap.add_argument("--slot-ctx", type=int, default=8192, help="context tokens per slot (default: 8192)")
    ap.add_argument("--instruction", default=INSTRUCTION)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--repeat-penalty", type=float, default=None,
                    help="sent with each request when given (default: the server's own, 1.0 = off)")
    ap.add_argument("--cache-prompt", action="store_true", help="let llama.cpp reuse prompt caches")
    ap.add_argument("--no-bench", action="store_true", help="skip llama-bench")
    ap.add_argument("--bench-reps", type=int, default=5, help="llama-bench -r (default: 5, its own)")
    ap.add_argument("--no-single", action="store_true", help="skip the single-document run")
    ap.add_argument("--single-doc", default=None, help="id of the single-run document (default: the first)")
    ap.add_argument("--server-bin", default=os.path.join(HERE, "bin", "llama-server"))
    ap.add_argument("--bench-bin", default=os.path.join(HERE, "bin", "llama-bench"))
    ap.add_argument("--server-arg", action="append", default=[],
                    help="extra llama-server argument (repeat; e.g. --server-arg=-fa --server-arg=on)")
    ap.add_argument("--port", type=int, default=0, help="server port (default: a free one)")
    ap.add_argument("--out", required=True, help="JSON lines file the results are appended to")
    ap.add_argument("--summaries", default=None, help="JSON lines file for every summary (with P)")
    ap.add_argument("--log-dir", default=None, help="server logs (default: next to --out)")
    args = ap.parse_args()
    if args.threads is None:
        args.threads = len(cpu_list(args.cpus)) if args.cpus else os.cpu_count()

    parallels = SWEEP if args.sweep else [int(p) for p in args.parallel.split(",") if p.strip()]
    docs = load_documents(args.docs, args.limit, args.include_scans)
    if not docs:
        sys.exit("no documents")
    log_dir = args.log_dir or os.path.dirname(os.path.abspath(args.out))
    os.makedirs(log_dir, exist_ok=True)

    version = subprocess.run([args.server_bin, "--version"], capture_output=True, text=True)
    common = {
        "engine": "llama.cpp",
        "llama_cpp_version": (version.stdout + version.stderr).strip().splitlines()[-2:],
        "model": os.path.relpath(os.path.abspath(args.model), ROOT),
        "model_bytes": os.path.getsize(args.model),
        "threads": args.threads,
        "cpus": args.cpus,
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "host": platform.node(),
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "docs_file": os.path.relpath(os.path.abspath(args.docs), ROOT),
        "limit": args.limit,
        "slot_ctx": args.slot_ctx,
        "max_tokens": args.max_tokens,
        "seed": args.seed,
        "repeat_penalty": args.repeat_penalty,
        "cache_prompt": args.cache_prompt,
        "instruction": args.instruction,
    }

    def emit(line):
        line = {**line, **common}
        s = json.dumps(line, ensure_ascii=False)
        print(s, flush=True)
        with open(args.out, "a", encoding="utf-8") as f:
            f.write(s + "\n")

    if not args.no_bench:
        emit(run_llama_bench(args))

    model_tag = os.path.splitext(os.path.basename(args.model))[0]
    single_done = args.no_single
    order = list(dict.fromkeys(parallels))
    if not single_done and 1 not in order:
        order = [1] + order  # a P=1 server for the single-document run only
    for p in order:
        server = Server(args, p, os.path.join(log_dir, f"llama-server-{model_tag}-p{p}.log"))
        try:
            server.start()
            props = server.props() or {}
            # Warm-up (not timed): a short unrelated request, so the first document does not pay for
            # faulting in the memory-mapped weights.
            server.chat(args, "Warm-up.", max_tokens=4)
            extra = {"server_start_s": round(server.start_s, 3), "server_command": " ".join(server.cmd),
                     "server_build": props.get("build_info"), "server_n_ctx": (props.get(
                         "default_generation_settings") or {}).get("n_ctx")}
            if p == 1 and not single_done:
                doc = docs[0]
                if args.single_doc:
                    doc = next(d for d in load_documents(args.docs, 0, True) if d["id"] == args.single_doc)
                emit({**run_single(server, args, doc), **extra})
                single_done = True
            if p in parallels:
                line, summaries = run_folder(server, args, docs, p)
                emit({**line, **extra})
                if args.summaries:
                    with open(args.summaries, "a", encoding="utf-8") as f:
                        for s in summaries:
                            f.write(json.dumps({"parallel": p, "model": common["model"], **s},
                                               ensure_ascii=False) + "\n")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
