"""The Hugging Face baseline for `warpfold score`: padded batches, transformers' own forward.

  hf_score.py --model DIR --ids FILE.jsonl --batch-size 8 --attn sdpa|flash_attention_2 --out-dir DIR
    [--memory-fraction F] [--token-budget N]

Reads the same {"ids": [...]} lines warpfold scores and computes each document's mean next-token
log-likelihood from the logits, as a user of transformers would. Batches: by default as they come
(batch of 8, right padding, attention mask: the naive baseline); with --token-budget N, what a careful
user does: documents sorted by length, longest first, each batch as many as fit in N padded tokens
(longest × count <= N; a document longer than N alone), so padding is small and the GPU is full.
Scores are written in the input order either way. Prints one JSON object: seconds of
the timed run (after one warm-up batch), real and padded tokens, tokens/s, peak GPU memory, and the
path of the per-document scores (one JSON line each) for the correctness check.
"""
import argparse
import json
import os
import time

import torch
from transformers import AutoModelForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--ids", required=True)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--attn", default="sdpa")
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--memory-fraction", type=float, default=None)
    ap.add_argument("--token-budget", type=int, default=None)
    args = ap.parse_args()
    if args.memory_fraction:
        torch.cuda.set_per_process_memory_fraction(args.memory_fraction)
    docs = [json.loads(line)["ids"] for line in open(args.ids)]
    model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.bfloat16, attn_implementation=args.attn).cuda().eval()

    def run(batch_docs):
        longest = max(len(d) for d in batch_docs)
        ids = torch.zeros((len(batch_docs), longest), dtype=torch.long)
        mask = torch.zeros((len(batch_docs), longest), dtype=torch.long)
        for i, d in enumerate(batch_docs):
            ids[i, :len(d)] = torch.tensor(d)
            mask[i, :len(d)] = 1
        ids, mask = ids.cuda(), mask.cuda()
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=mask).logits
            out = []
            for i, d in enumerate(batch_docs):
                n = len(d)
                if n < 2:
                    out.append(0.0)
                    continue
                lp = torch.log_softmax(logits[i, :n - 1].float(), dim=-1)
                out.append(lp.gather(1, ids[i, 1:n].unsqueeze(1)).mean().item())
        return out, longest * len(batch_docs)

    # Batches as lists of document indices.
    if args.token_budget:
        order = sorted(range(len(docs)), key=lambda i: -len(docs[i]))
        batches, current = [], []
        for i in order:
            # Sorted longest first: the batch's first document is its longest.
            if current and len(docs[current[0]]) * (len(current) + 1) > args.token_budget:
                batches.append(current)
                current = []
            current.append(i)
        if current:
            batches.append(current)
        how = f"length-sorted batches of at most {args.token_budget} padded tokens"
    else:
        batches = [list(range(s, min(s + args.batch_size, len(docs)))) for s in range(0, len(docs), args.batch_size)]
        how = f"padded batches of {args.batch_size}"
    run([docs[i] for i in batches[0]])  # warm-up
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    by_index, padded = {}, 0
    error = None
    t0 = time.perf_counter()
    try:
        for batch in batches:
            out, computed = run([docs[i] for i in batch])
            by_index.update(zip(batch, out))
            padded += computed
        torch.cuda.synchronize()
    except torch.OutOfMemoryError as e:
        error = f"out of memory after {len(by_index)} of {len(docs)} documents: {str(e).splitlines()[0]}"
    seconds = time.perf_counter() - t0
    # In input order, up to the first document not scored (all of them unless out of memory).
    scores = []
    while len(scores) in by_index:
        scores.append(by_index[len(scores)])
    real = sum(len(docs[i]) for i in by_index)
    tag = f"-budget{args.token_budget}" if args.token_budget else ""
    path = os.path.join(args.out_dir, f"hf-scores-{args.attn}{tag}.jsonl")
    with open(path, "w") as f:
        for s in scores:
            f.write(json.dumps({"mean_log_likelihood": s}) + "\n")
    print(json.dumps({
        "system": f"transformers {__import__('transformers').__version__} ({args.attn}, {how}, bf16)",
        "documents": len(by_index), "batches": len(batches), "seconds": seconds, "real_tokens": real, "computed_tokens": padded,
        "padding_percent": 100.0 * (padded - real) / max(padded, 1), "tokens_per_second": real / seconds,
        "peak_gpu_gib": torch.cuda.max_memory_allocated() / 2**30, "scores": path, "error": error,
    }))


if __name__ == "__main__":
    main()
