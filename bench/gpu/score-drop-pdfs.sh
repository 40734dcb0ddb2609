#!/usr/bin/env bash
# Issue 15 item 5, on the build machine: scores what bench/gpu/run-drop-pdfs.sh brought back and
# prints the comparison. DIR holds the stages' TAG-ours.tar.xz, TAG-peer.tar.xz, TAG-peer8.tar.xz (the
# last call of each stage: its tar holds every earlier call's files too); they are unpacked into
# DIR/ours, DIR/peer, DIR/peer8.
#
#   bash bench/gpu/score-drop-pdfs.sh DIR [TAG]     # TAG: the outputs' prefix (drop-pdfs)
#
# Key facts kept, subject named, loops: examples/summary_settings --score with the documents of
# bench/gpu/e2e-words.txt (the quality documents with --seeds 7,101,9 --words 250,450,950). Speed:
# the app core's report (app_core.py) and the peer's state (peer_e2e.py). GPU busy: nvidia-smi's
# utilization, mean over each run's span (ours: from adding the folder to the last summary; the peer:
# its calls, with and without the chat model's loads); peak memory: the most nvidia-smi's memory.used
# showed in that span (the peer also reports torch's own peak).
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=$(realpath "${1:?usage: score-drop-pdfs.sh DIR [TAG]}")
TAG=${2:-drop-pdfs}
ex=target/release/examples/summary_settings
[ -x $ex ] || cargo build --release --locked -p warpfold-summarize --example summary_settings
words=$(cat bench/gpu/e2e-words.txt)
for s in ours peer peer8; do
  if [ -f "$dir/$TAG-$s.tar.xz" ]; then mkdir -p "$dir/$s" && xz -dc "$dir/$TAG-$s.tar.xz" | tar -C "$dir/$s" -xf -; fi
done
score() { # FILE [args...]: summary_settings's per-document lines into FILE.score, the totals line printed
  local f=$1; shift
  [ -s "$f" ] || return 0
  # Only summary lines (every line has a path).
  grep '"path"' "$f" > "$f.lines"
  $ex "$@" --score "$f.lines" > "$f.score"
  echo "$(basename "$f"): $(tail -1 "$f.score" | sed 's/^[^:]*: //')"
}
echo "=== key facts"
score "$dir/ours/q-qwen.jsonl" --seeds 7,101,9 --words 250,450,950 || true
for f in "$dir"/ours/e2e-ours-*.jsonl "$dir"/ours/cli-ours.jsonl "$dir"/peer/e2e-peer.jsonl "$dir"/peer8/e2e-peer8.jsonl; do
  [ -f "$f" ] && score "$f" --words "$words"
done
echo "=== decode rate (warpfold summarize on the same PDFs)"
tail -2 "$dir/ours/cli-ours.err" 2>/dev/null || echo "not run"
echo "=== comparison"
python3 - "$dir" <<'PY'
import datetime, glob, json, os, re, sys

d = sys.argv[1]


def smi(path):
    """(epoch, utilization %, memory MiB) samples of an .smi file, its clock tied to the epoch by .anchor."""
    if not os.path.exists(path):
        return []
    anchor = open(path + ".anchor").read().split()
    epoch, local = float(anchor[1]), anchor[3] + " " + anchor[4][:15]
    offset = epoch - datetime.datetime.strptime(local, "%Y/%m/%d %H:%M:%S.%f").timestamp()
    out = []
    for line in open(path):
        parts = [p.strip() for p in line.split(",")]
        try:
            t = datetime.datetime.strptime(parts[0][:26], "%Y/%m/%d %H:%M:%S.%f").timestamp() + offset
            out.append((t, float(parts[1]), float(parts[2])))
        except (ValueError, IndexError):
            pass
    return out


def busy(samples, spans, skip=()):
    """Mean utilization and peak memory (GiB) over samples inside any of `spans`, outside `skip`."""
    inside = [s for s in samples if any(a <= s[0] <= b for a, b in spans) and not any(a <= s[0] <= b for a, b in skip)]
    if not inside:
        return None, None
    return sum(s[1] for s in inside) / len(inside), max(s[2] for s in inside) / 1024


def facts(path):
    p = path + ".score"
    if not os.path.exists(p):
        return "-"
    m = re.search(r"(\d+) summaries; key facts (\d+) of (\d+).*subject named (\d+); looping (\d+)", open(p).read().splitlines()[-1])
    return f"{m[2]} of {m[3]} ({m[1]} docs; named {m[4]}, looping {m[5]})" if m else "-"


rows = []
for run in ("whole", "8gib"):
    r = os.path.join(d, "ours", f"e2e-ours-{run}.json")
    if not os.path.exists(r):
        continue
    j = json.load(open(r))
    end = j["t_summarized_epoch"] or (j["t0_epoch"] + 600)
    u, mem = busy(smi(os.path.join(d, "ours", f"e2e-ours-{run}.smi")), [(j["t0_epoch"], end)])
    rows.append({
        "system": "warpfold app core" + (", --vram-budget 8GiB" if run == "8gib" else ", whole GPU"),
        "docs": j["summaries"], "indexed_s": j["indexed_seconds"], "until_done_s": j["summarized_seconds"],
        "until_done_with_load_s": j["summarized_seconds"],  # the app's model load is inside its span
        "summarizing_s": j["summarizer_model_seconds"], "dpm": j["documents_per_minute_summarizing"],
        "dpm_e2e": j["documents_per_minute_end_to_end"], "gen_tps": j["generated_tokens_per_second_summarizing"],
        "tokens_out": j["tokens_out"], "busy": u, "mem": mem, "busy_noload": None, "torch_peak": None,
        "facts": facts(r[:-5] + ".jsonl"), "cap": "8gib" if run == "8gib" else "whole", "all": j["all_summarized"],
    })
for stage in ("peer", "peer8"):
    p = os.path.join(d, stage, f"e2e-{stage}.jsonl.state.json")
    if not os.path.exists(p):
        continue
    st = json.load(open(p))
    t = st.get("totals", {})
    samples = [s for f in sorted(glob.glob(os.path.join(d, stage, f"e2e-{stage}-call*.smi"))) for s in smi(f)]
    spans = [(c["started"], c.get("t_end", c["started"] + 600)) for c in st["calls"]]
    loads = [(c["t_load_start"], c["t_load_end"]) for c in st["calls"] if "t_load_end" in c]
    u, mem = busy(samples, spans)
    u2, _ = busy(samples, spans, loads)
    rows.append({
        "system": "transformers peer" + (", capped at 8 GiB" if stage == "peer8" else ", whole GPU"),
        "docs": t.get("documents_summarized"), "indexed_s": st["extract_seconds"] + st["chunk_seconds"] + st.get("import_seconds", 0)
        + st.get("embed_load_seconds", 0) + st.get("embed_seconds", 0),
        "until_done_s": t.get("until_all_done_seconds_without_chat_load"), "until_done_with_load_s": t.get("until_all_done_seconds_with_first_load"),
        "summarizing_s": t.get("summarize_seconds"), "dpm": t.get("documents_per_minute"),
        "dpm_e2e": t.get("documents_per_minute_end_to_end_with_first_load"), "gen_tps": t.get("generated_tokens_per_second"),
        "tokens_out": t.get("tokens_out"), "busy": u, "mem": mem, "busy_noload": u2, "torch_peak": t.get("peak_gib"),
        "facts": facts(os.path.join(d, stage, f"e2e-{stage}.jsonl")), "cap": "8gib" if stage == "peer8" else "whole",
        "all": t.get("all_done"), "calls": t.get("calls"), "loads": list(zip([round(x, 1) for x in t.get("chat_model_loads_seconds", [])],
                                                                             t.get("chat_model_loads_from", []))),
        "oom_splits": t.get("oom_splits"), "extract_from": st.get("extract_seconds_from"),
    })

f = lambda x, n=1: "-" if x is None else f"{x:.{n}f}"
print("| system | documents | all done | indexed/embedded s | until all summarized s (with the chat load) | summarizing s | **documents/min** (summarizing) | documents/min end to end | generated tokens/s | key facts kept | GPU util. mean (loads excluded) | peak GPU memory GiB (torch) |")
print("|---|---:|---|---:|---:|---:|---:|---:|---:|---|---:|---:|")
for r in rows:
    print(f"| {r['system']} | {r['docs']} | {r['all']} | {f(r['indexed_s'])} | {f(r['until_done_s'])} ({f(r['until_done_with_load_s'])}) | {f(r['summarizing_s'])} | "
          f"**{f(r['dpm'])}** | {f(r['dpm_e2e'])} | {f(r['gen_tps'], 0)} | {r['facts']} | {f(r['busy'], 0)}%"
          f"{' (' + f(r['busy_noload'], 0) + '%)' if r['busy_noload'] is not None else ''} | {f(r['mem'])}{' (' + f(r['torch_peak']) + ')' if r['torch_peak'] else ''} |")
for cap in ("whole", "8gib"):
    ours = next((r for r in rows if r["cap"] == cap and r["system"].startswith("warpfold")), None)
    peer = next((r for r in rows if r["cap"] == cap and r["system"].startswith("transformers")), None)
    if ours and peer and ours["dpm"] and peer["dpm"]:
        print(f"{cap}: warpfold / peer documents/min {ours['dpm'] / peer['dpm']:.2f}x summarizing, "
              f"{ours['dpm_e2e'] / peer['dpm_e2e']:.2f}x end to end (the peer with its first chat-model load)")
for r in rows:
    if r.get("calls"):
        print(f"{r['system']}: {r['calls']} call(s), chat model loads (seconds, from) {r['loads']}, OOM splits {r['oom_splits']}"
              + (f", extraction time taken from {r['extract_from']}" if r.get("extract_from") else ""))
PY
