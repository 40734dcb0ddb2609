"""The peer for `warpfold bench --peer`: embed the same chunk texts with sentence-transformers.

Started by `warpfold bench`, which passes the model folder (the same files warpfold loads) and a JSON
list of texts. Prints one JSON object on stdout: wall time of `encode` (tokenization included, as a
user would run it), real and padded token counts, batches, peak RSS, and the path of the embeddings
(little-endian f32, one row per text) so warpfold can check that both systems agree.
"""
import argparse
import json
import os
import resource
import time

import torch
from sentence_transformers import SentenceTransformer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--texts", required=True)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--batch-size", type=int, default=32)  # sentence-transformers' default
    ap.add_argument("--device", default="cpu")
    # bf16: the whole model cast to bfloat16, the one line a user adds for speed (AMX on Intel).
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    args = ap.parse_args()

    texts = json.load(open(args.texts))
    model = SentenceTransformer(args.model, device=args.device)
    if args.dtype == "bf16":
        model = model.to(torch.bfloat16)
    tok = model.tokenizer
    # Count what each padded batch computes, with the library's own length sort and batching.
    lengths = [len(tok(t)["input_ids"]) for t in texts]
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    padded = 0
    batches = 0
    for s in range(0, len(order), args.batch_size):
        batch = [lengths[i] for i in order[s:s + args.batch_size]]
        padded += max(batch) * len(batch)
        batches += 1
    model.encode(texts[:16], batch_size=args.batch_size)  # warm-up, as warpfold does
    t0 = time.perf_counter()
    emb = model.encode(texts, batch_size=args.batch_size, convert_to_tensor=True, normalize_embeddings=False)
    seconds = time.perf_counter() - t0
    emb = emb.float().cpu().numpy()
    path = os.path.join(args.out_dir, "peer_embeddings.f32")
    emb.astype("<f4").tofile(path)
    print(json.dumps({
        "system": f"sentence-transformers {__import__('sentence_transformers').__version__} (torch {torch.__version__}, {args.device}, {args.dtype}, {torch.get_num_threads()} threads, batch {args.batch_size})",
        "seconds": seconds,
        "tokens": sum(lengths),
        "padded_tokens": padded,
        "batches": batches,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "embeddings_file": path,
        "peak_gpu_mib": torch.cuda.max_memory_allocated() / 2**20 if args.device.startswith("cuda") else None,
    }))


if __name__ == "__main__":
    main()
