"""Draws the GPU benchmark of record (issue 4) from a device run's files: tokens/s and peak GPU memory
of warpfold against transformers (decoders) and sentence-transformers (MiniLM), stress and production.

  plot.py RESULTS_DIR OUT.png      # RESULTS_DIR holds summary.json and gpu-minilm.json
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(results, out):
    s = json.load(open(os.path.join(results, "summary.json")))
    m = json.load(open(os.path.join(results, "gpu-minilm.json")))
    wf, peers, smi = s["warpfold"], s["peers"], s["nvidia_smi_peak_mib"]
    groups, ours, theirs, mem_ours, mem_theirs = [], [], [], [], []
    for model, label in (("qwen2.5-7b", "Qwen2.5-7B arch"), ("smollm2-360m", "SmolLM2-360M arch")):
        for corpus in ("stress", "production"):
            key = f"{model}-{corpus}-16k" if model == "qwen2.5-7b" else f"{model}-{corpus}"
            groups.append(f"{label}\n{corpus}")
            ours.append(wf[key]["tokens_per_second"])
            theirs.append(peers[f"{model}-{corpus}-sdpa"]["tokens_per_second"])
            mem_ours.append(smi.get(f"wf-{key}", 0) / 1024)
            mem_theirs.append(smi.get(f"hf-{model}-{corpus}-sdpa", 0) / 1024)
    for c in m["corpora"]:
        runs = {r["system"].split(" (")[0].split(",")[0]: r for r in c["runs"]}
        e2e = next(r for r in c["runs"] if "end to end" in r["system"])
        peer = next(r for r in c["runs"] if r["system"].startswith("sentence-transformers"))
        groups.append(f"MiniLM-L6 (real)\n{c['corpus']}, end to end")
        ours.append(e2e["tokens_per_second"])
        theirs.append(peer["tokens_per_second"])
        mem_ours.append(0)
        mem_theirs.append(0)
        del runs
    fig, (a, b) = plt.subplots(1, 2, figsize=(14, 5.2), gridspec_kw={"width_ratios": [3, 2]})
    x = range(len(groups))
    w = 0.38
    a.bar([i - w / 2 for i in x], ours, w, label="warpfold packed (FA-2 varlen)", color="#2a7ab0")
    a.bar([i + w / 2 for i in x], theirs, w, label="transformers padded (sdpa) / sentence-transformers", color="#c8873a")
    for i, (o, t) in enumerate(zip(ours, theirs)):
        a.text(i, max(o, t) * 1.15, f"{o / t:.2f}×", ha="center", fontsize=9, fontweight="bold")
    a.set_yscale("log")
    a.set_ylabel("real tokens / s (log)")
    a.set_xticks(list(x), groups, fontsize=8)
    a.legend(fontsize=8, loc="upper left")
    a.set_title("Throughput, same token ids, one H200")
    n = 4
    b.bar([i - w / 2 for i in range(n)], mem_ours[:n], w, label="warpfold (7B: bins of 16,384)", color="#2a7ab0")
    b.bar([i + w / 2 for i in range(n)], mem_theirs[:n], w, label="transformers", color="#c8873a")
    b.set_xticks(list(range(n)), groups[:n], fontsize=8)
    b.set_ylabel("peak GPU memory, GiB (nvidia-smi, whole process)")
    b.legend(fontsize=8)
    b.set_title("Peak memory (decoders)")
    fig.suptitle(f"warpfold GPU benchmark ({os.path.basename(os.path.normpath(results))})", fontsize=11)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
