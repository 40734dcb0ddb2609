"""Is a bf16 path worth building for the CPU encoder on an Intel CPU with AMX? (issue 17)

Measured with PyTorch (oneDNN) on the machine it runs on, pinned to two physical cores as the bench
runs are, before any Rust is written:
  1. the matrix products of all-MiniLM-L6-v2's layers (x @ W^T, the encoder's block shapes) in f32 and
     in bf16, GFLOP/s, and which oneDNN kernel ran the bf16 one (ONEDNN_VERBOSE);
  2. sentence-transformers itself in f32 and in bf16 (model.to(torch.bfloat16), the way a user
     would run the peer in bf16) on ~230-token chunks of this repository's text: tokens/s, and the
     bf16 vectors' cosine to the f32 ones (issue 17 asks for >= 0.9999 in f32).

    python3 bench/cpu/amx_probe.py MODEL_DIR [--cpus 0,1] [--rounds 2] [--chunks 400]
"""

import argparse
import os
import pathlib
import subprocess
import sys
import time

import torch


def flags():
    text = pathlib.Path("/proc/cpuinfo").read_text()
    line = next(l for l in text.splitlines() if l.startswith("flags"))
    have = set(line.split(":", 1)[1].split())
    model = next(l for l in text.splitlines() if l.startswith("model name")).split(":", 1)[1].strip()
    return model, {f: f in have for f in ["avx512f", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8"]}


def rate(m, n, k, dtype, reps):
    x = torch.randn(m, k).to(dtype)
    w = torch.randn(n, k).to(dtype)
    for _ in range(5):
        torch.nn.functional.linear(x, w)
    t = time.perf_counter()
    for _ in range(reps):
        torch.nn.functional.linear(x, w)
    return 2 * m * n * k * reps / (time.perf_counter() - t) / 1e9


def kernel_names():
    """oneDNN's verbose lines for one bf16 and one f32 product, in a child (the variable is read once)."""
    code = (
        "import torch; x=torch.randn(256,384); w=torch.randn(1536,384);"
        "torch.nn.functional.linear(x.bfloat16(), w.bfloat16()); torch.nn.functional.linear(x, w)"
    )
    env = dict(os.environ, ONEDNN_VERBOSE="1", DNNL_VERBOSE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stdout
    return [l for l in out.splitlines() if "exec" in l][:4] or ["(no oneDNN exec lines: not oneDNN, or verbose off)"]


def corpus(root, words=180, limit=400):
    text = " ".join(
        p.read_text(errors="replace")
        for p in sorted(root.glob("*.md")) + sorted((root / "docs").glob("*.md"))
    ).split()
    return [" ".join(text[i : i + words]) for i in range(0, len(text) - words, words)][:limit]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--cpus", default="0,1")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--chunks", type=int, default=400)
    a = ap.parse_args()
    cpus = {int(c) for c in a.cpus.split(",")}
    os.sched_setaffinity(0, cpus)
    torch.set_num_threads(len(cpus))
    model, f = flags()
    print(f"cpu: {model}; pinned to {sorted(cpus)}; torch {torch.__version__}, {torch.get_num_threads()} threads")
    print("flags:", ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in f.items()))
    print("oneDNN kernels:")
    for l in kernel_names():
        print("  ", l[:200])

    print("\nmatrix products, GFLOP/s (x: rows x in, W: out x in)")
    print(f"{'rows':>6} {'in':>6} {'out':>6} {'f32':>9} {'bf16':>9} {'bf16/f32':>9}")
    for rows in (256, 2048):
        for inp, out in ((384, 1152), (384, 384), (384, 1536), (1536, 384)):
            reps = max(10, int(4e10 / (2 * rows * inp * out)))
            r32 = rate(rows, out, inp, torch.float32, reps)
            r16 = rate(rows, out, inp, torch.bfloat16, reps)
            print(f"{rows:>6} {inp:>6} {out:>6} {r32:>9.1f} {r16:>9.1f} {r16 / r32:>8.2f}x")

    from sentence_transformers import SentenceTransformer

    texts = corpus(pathlib.Path(__file__).resolve().parents[2], limit=a.chunks)
    st = SentenceTransformer(a.model_dir, device="cpu")
    tokens = sum(len(ids) for ids in st.tokenizer(texts, truncation=True, max_length=st.max_seq_length)["input_ids"])
    print(f"\nsentence-transformers on {len(texts)} chunks, {tokens} tokens, batch 32, length-sorted by the library")
    reference = st.encode(texts, batch_size=32, convert_to_tensor=True).float()
    st16 = SentenceTransformer(a.model_dir, device="cpu").to(torch.bfloat16)
    for r in range(a.rounds):
        for name, m in (("f32", st), ("bf16", st16)):
            t = time.perf_counter()
            v = m.encode(texts, batch_size=32, convert_to_tensor=True).float()
            s = time.perf_counter() - t
            cos = torch.nn.functional.cosine_similarity(v, reference)
            print(f"round {r + 1} {name:>4}: {tokens / s:8.0f} tokens/s  cosine to f32 min {cos.min():.6f} mean {cos.mean():.6f}")


if __name__ == "__main__":
    main()
