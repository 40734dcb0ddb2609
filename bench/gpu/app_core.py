"""The app core on a GPU, as a user meets it: `warpfold serve` (the same App the desktop runs) watches a
folder of documents; this script adds the folder, asks searches while it indexes (their latency under
load), waits until every document is finished, and writes what the app reported.

    python3 app_core.py WARPFOLD FOLDER OUT.json [--window adaptive|fixed] [--device cuda] [--extra ARG ...]

Standard library only (the GPU machine has no network). Prints one line per second of progress.
"""
import json
import os
import socket
import subprocess
import sys
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


def main():
    warpfold, folder, out = sys.argv[1], sys.argv[2], sys.argv[3]
    rest = sys.argv[4:]
    window = rest[rest.index("--window") + 1] if "--window" in rest else "adaptive"
    device = rest[rest.index("--device") + 1] if "--device" in rest else "cuda"
    extra = rest[rest.index("--extra") + 1:] if "--extra" in rest else []
    data = f"/tmp/app-{window}-{os.getpid()}"
    port, token = free_port(), "bench-token"
    cmd = [warpfold, "--device", device, "--window", window, *extra, "serve", "--addr", f"127.0.0.1:{port}",
           "--token", token, "--data-dir", data]
    log = open(out + ".log", "w")
    started = time.time()
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True)
    line = server.stdout.readline()
    if "listening" not in line:
        print("serve did not start:", line, file=sys.stderr)
        sys.exit(1)
    ready_s = time.time() - started
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


if __name__ == "__main__":
    main()
