"""The app core on a GPU, as a user meets it: `warpfold serve` (the same App the desktop runs) watches a
folder of documents; this script adds the folder, asks searches while it indexes (their latency under
load), waits until every document is finished, and writes what the app reported.

    python3 app_core.py WARPFOLD FOLDER OUT.json [--window adaptive|fixed] [--device cuda]
        [--summarize CHAT_MODEL [--summaries-out FILE.jsonl]] [--serve-arg ARG ...] [--timeout 540]
        [--extra ARG ...]

`--extra` takes the rest of the line as warpfold's global options (before `serve`: `--vram-budget
8GiB`, `--model DIR`); `--serve-arg` (repeatable) adds one argument after `serve` (summary settings such
as `--max-tokens 160`). The environment passes through (WARPFOLD_* switches).

With `--summarize` (the end-to-end run of issue 15 item 5) the server runs `serve --summarize
--chat-model CHAT_MODEL`: every document is summarized once indexed. The script then asks no searches
(the transformers peer does none either), follows the `summary` events (GET /api/events) and waits
until every document with text has its summary; it reports the seconds from adding the folder until
every document was indexed and until every one was summarized, documents per minute, the
summarizer's batches (a batch's summaries arrive together; its model time is the longest `seconds`
the index stored for them, counted from that batch's start, so the model load is outside), tokens in
and out, and the wall-clock span (`t0_epoch`, `t_summarized_epoch`) for the GPU-busy samples. Decode
tokens per second are not exposed by the app (no metric, no state field; `warpfold summarize` prints
them): what it gives is generated tokens over the summarizer's model time. The summaries are read from
the index afterwards and written to `--summaries-out` as {"path", "summary", "tokens_in", "tokens_out",
"seconds"} lines (summary_settings --score reads them).

Standard library only (the GPU machine has no network). Prints one line per second of progress.
"""
import json
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(base, path, token):
    req = urllib.request.Request(base + path, headers={"Authorization": "Bearer " + token})
    with urllib.request.urlopen(req, timeout=120) as r:
        return r.read().decode()


def post(base, path, token, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return r.read().decode()


def metric(text, name):
    for line in text.splitlines():
        if line.startswith("warpfold_" + name + " "):
            return float(line.split()[1])
    return None


class SummaryEvents:
    """Follows GET /api/events on a thread of its own and keeps the `summary` events: path -> (arrival
    time, error)."""

    def __init__(self, base, token):
        self.arrived = {}
        self.resyncs = 0
        self.lock = threading.Lock()
        req = urllib.request.Request(base + "/api/events", headers={"Authorization": "Bearer " + token})
        self.stream = urllib.request.urlopen(req, timeout=3600)
        threading.Thread(target=self.follow, daemon=True).start()

    def follow(self):
        event = None
        try:
            for raw in self.stream:
                line = raw.decode().rstrip("\n")
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:") and event in ("summary", "resync"):
                    if event == "resync":
                        self.resyncs += 1
                        continue
                    e = json.loads(line[5:].strip())
                    with self.lock:
                        self.arrived.setdefault(e["path"], (time.time(), e.get("error")))
                elif not line:
                    event = None
        except Exception as e:  # the server went away at the end
            print("events:", e, file=sys.stderr)

    def snapshot(self):
        with self.lock:
            return dict(self.arrived)


def summaries_from_index(db):
    """Every summary the index holds: path, summary, tokens in and out, seconds from its batch's start."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    rows = con.execute("SELECT path, summary, tokens_in, tokens_out, seconds FROM summaries ORDER BY path").fetchall()
    con.close()
    return [dict(zip(("path", "summary", "tokens_in", "tokens_out", "seconds"), r)) for r in rows]


def batches_of(arrivals, gap=0.5):
    """Summary events grouped into the summarizer's batches: a batch publishes all its summaries at once,
    so events less than `gap` seconds apart are one batch. Returns lists of paths, in order."""
    out = []
    last = None
    for t, path in sorted((t, p) for p, (t, _) in arrivals.items()):
        if last is None or t - last > gap:
            out.append([])
        out[-1].append(path)
        last = t
    return out


def main():
    warpfold, folder, out = sys.argv[1], sys.argv[2], sys.argv[3]
    rest = sys.argv[4:]
    extra = rest[rest.index("--extra") + 1:] if "--extra" in rest else []
    rest = rest[:rest.index("--extra")] if "--extra" in rest else rest
    opt = lambda name, default: rest[rest.index(name) + 1] if name in rest else default
    window = opt("--window", "adaptive")
    device = opt("--device", "cuda")
    chat_model = opt("--summarize", None)
    summaries_out = opt("--summaries-out", None)
    timeout = float(opt("--timeout", 540))
    serve_args = [rest[i + 1] for i, a in enumerate(rest) if a == "--serve-arg"]
    if chat_model:
        serve_args = ["--summarize", "--chat-model", chat_model, *serve_args]
    data = f"/tmp/app-{window}-{os.getpid()}"
    port, token = free_port(), "bench-token"
    cmd = [warpfold, "--device", device, "--window", window, *extra, "serve", "--addr", f"127.0.0.1:{port}",
           "--token", token, "--data-dir", data, *serve_args]
    print(" ".join(cmd), flush=True)
    if chat_model:
        return summarize_run(cmd, folder, out, summaries_out, timeout, data, token, port)
    server, ready_s = start_server(cmd, out)
    base = f"http://127.0.0.1:{port}"
    state = json.loads(get(base, "/api/state", token))
    print(json.dumps({"device": state["device"]}, indent=None)[:600])
    total_files = sum(1 for _, _, fs in os.walk(folder) for f in fs if f.lower().endswith((".pdf", ".txt", ".md")))
    queries = ["when should tomatoes be picked", "the committee approved the budget", "river herons nesting",
               "quarterly revenue growth", "lighthouse keeper logbook"]
    latencies = []
    t0 = time.time()
    post(base, "/api/folders", token, {"path": folder})
    i = 0
    while True:
        q = queries[i % len(queries)]
        i += 1
        s = time.time()
        get(base, "/api/search?q=" + urllib.request.quote(q) + "&k=5", token)
        latencies.append(time.time() - s)
        state = json.loads(get(base, "/api/state", token))
        c = state["queue"]["counts"]
        finished = c["done"] + c["failed"] + c["no_text"] + c.get("skipped", 0)
        if i % 10 == 0:
            print(f"{time.time() - t0:6.1f} s  {finished}/{total_files} finished  {c}", flush=True)
        if finished >= total_files and c["waiting"] + c["extracting"] + c["embedding"] == 0:
            break
        if time.time() - t0 > 540:
            print("gave up after 540 s", flush=True)
            break
        time.sleep(0.2)
    seconds = time.time() - t0
    metrics = get(base, "/metrics", token)
    state = json.loads(get(base, "/api/state", token))
    server.terminate()
    server.wait(timeout=30)
    latencies.sort()
    p = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1e3
    real = metric(metrics, "real_tokens_total") or 0.0
    busy = metric(metrics, "backend_busy_seconds_total") or 0.0
    report = {
        "window": window,
        "device": state["device"],
        "model": state["model"],
        "files": total_files,
        "counts": state["queue"]["counts"],
        "documents": state.get("documents"),
        "chunks": state.get("chunks"),
        "server_ready_seconds": ready_s,
        "indexing_seconds": seconds,
        "documents_per_second": total_files / seconds,
        "tokens_embedded": real,
        "tokens_per_second_end_to_end": real / seconds,
        "model_busy_seconds": busy,
        "tokens_per_second_while_model_busy": real / busy if busy else None,
        "bins": metric(metrics, "bins_total"),
        "bin_fill_ratio": metric(metrics, "bin_fill_ratio"),
        "bulk_bin_fill_ratio": metric(metrics, "bulk_bin_fill_ratio"),
        "interactive_bins": metric(metrics, "interactive_bins_total"),
        "bin_capacity_tokens": metric(metrics, "bin_capacity_tokens"),
        "device_starved_seconds": metric(metrics, "device_starved_seconds_total"),
        "queries_under_load": len(latencies),
        "query_ms_p50": p(0.50),
        "query_ms_p95": p(0.95),
        "query_ms_max": latencies[-1] * 1e3,
        "metrics": metrics,
    }
    json.dump(report, open(out, "w"), indent=1)
    print(json.dumps({k: v for k, v in report.items() if k not in ("metrics", "device")}, indent=1))


def start_server(cmd, out):
    """Starts `warpfold serve` (its log in OUT.log) and waits for its "listening" line: the process
    and the seconds it took."""
    log = open(out + ".log", "w")
    started = time.time()
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True)
    line = server.stdout.readline()
    if "listening" not in line:
        print("serve did not start:", line, file=sys.stderr)
        sys.exit(1)
    return server, time.time() - started


def summarize_run(cmd, folder, out, summaries_out, timeout, data, token, port):
    """`serve --summarize`: add the folder, wait until every document is indexed and summarized."""
    server, ready_s = start_server(cmd, out)
    base = f"http://127.0.0.1:{port}"
    state = json.loads(get(base, "/api/state", token))
    print(json.dumps({"device": state["device"], "summaries": state.get("summaries")})[:1500], flush=True)
    total_files = sum(1 for _, _, fs in os.walk(folder) for f in fs if f.lower().endswith((".pdf", ".txt", ".md")))
    events = SummaryEvents(base, token)
    t0 = time.time()
    post(base, "/api/folders", token, {"path": folder})
    indexed_at = summarized_at = None
    with_text = None
    i = 0
    while True:
        time.sleep(0.25)
        i += 1
        now = time.time()
        state = json.loads(get(base, "/api/state", token))
        c = state["queue"]["counts"]
        finished = c["done"] + c["failed"] + c["no_text"] + c.get("skipped", 0)
        if indexed_at is None and finished >= total_files and c["waiting"] + c["extracting"] + c["embedding"] == 0:
            indexed_at = now
            with_text = c["done"]
            print(f"{now - t0:6.1f} s  all {total_files} indexed  {c}", flush=True)
        arrived = events.snapshot()
        if i % 8 == 0:
            print(f"{now - t0:6.1f} s  {finished}/{total_files} indexed, {len(arrived)} summarized  {c}", flush=True)
        if indexed_at is not None and len(arrived) >= with_text:
            summarized_at = max(t for t, _ in arrived.values())
            break
        if now - t0 > timeout:
            print(f"gave up after {timeout:.0f} s", flush=True)
            break
        if server.poll() is not None:
            print("the server exited", flush=True)
            break
    end = time.time()
    arrived = events.snapshot()
    metrics = get(base, "/metrics", token)
    server.terminate()
    try:
        server.wait(timeout=60)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    rows = summaries_from_index(os.path.join(data, "index.db"))
    if summaries_out:
        with open(summaries_out, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    by_path = {r["path"]: r for r in rows}
    batches = []
    for paths in batches_of(arrived):
        stored = [by_path[p] for p in paths if p in by_path]
        batches.append({"documents": len(paths), "model_seconds": max((r["seconds"] for r in stored), default=None),
                        "arrived_seconds": arrived[paths[-1]][0] - t0})
    model_s = sum(b["model_seconds"] or 0 for b in batches)
    done = len(arrived)
    tokens_out = sum(r["tokens_out"] for r in rows)
    span = (summarized_at or end) - t0
    report = {
        "command": cmd,
        "device": state["device"],
        "summaries_settings": state.get("summaries"),
        "files": total_files,
        "counts": state["queue"]["counts"],
        "documents": state.get("documents"),
        "chunks": state.get("chunks"),
        "server_ready_seconds": ready_s,
        "t0_epoch": t0,
        "t_indexed_epoch": indexed_at,
        "t_summarized_epoch": summarized_at,
        "all_summarized": summarized_at is not None,
        "indexed_seconds": indexed_at - t0 if indexed_at else None,
        "summarized_seconds": summarized_at - t0 if summarized_at else None,
        "first_summary_seconds": min(t for t, _ in arrived.values()) - t0 if arrived else None,
        "summaries": done,
        "summary_errors": {p: e for p, (_, e) in arrived.items() if e},
        "event_resyncs": events.resyncs,
        "documents_per_minute_end_to_end": 60 * done / span if span > 0 else None,
        "summarizer_batches": batches,
        "summarizer_model_seconds": model_s,
        "documents_per_minute_summarizing": 60 * done / model_s if model_s else None,
        "tokens_in": sum(r["tokens_in"] for r in rows),
        "tokens_out": tokens_out,
        "generated_tokens_per_second_summarizing": tokens_out / model_s if model_s else None,
        # The app's own counters (/metrics summary_*): decode tokens over the decode steps' time.
        "decode_tokens": metric(metrics, "summary_decode_tokens_total"),
        "decode_steps": metric(metrics, "summary_decode_steps_total"),
        "decode_seconds": metric(metrics, "summary_decode_seconds_total"),
        "decode_tokens_per_second": (metric(metrics, "summary_decode_tokens_total") or 0) / metric(metrics, "summary_decode_seconds_total")
        if metric(metrics, "summary_decode_seconds_total") else None,
        "prompt_tokens": metric(metrics, "summary_prompt_tokens_total"),
        "prefill_seconds": metric(metrics, "summary_prefill_seconds_total"),
        "summary_model_seconds": metric(metrics, "summary_model_seconds_total"),
        "tokens_embedded": metric(metrics, "real_tokens_total"),
        "model_busy_seconds": metric(metrics, "backend_busy_seconds_total"),
        "metrics": metrics,
    }
    json.dump(report, open(out, "w"), indent=1)
    print(json.dumps({k: v for k, v in report.items() if k not in ("metrics", "device", "summaries_settings", "command")}, indent=1))


if __name__ == "__main__":
    main()
