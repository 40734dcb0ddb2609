"""The question-answering pipeline a user would write with the Python libraries, as the peer of
`warpfold ask --questions`: the QA set's documents cut into passages of about 200 words (each keeps
its document and page), embedded with sentence-transformers (all-MiniLM-L6-v2, normalized), the best
`--passages` of them by cosine (numpy is the vector store), and ONE prompt per question holding those
passages numbered [1]..[k] with their file and page, answered by the same GGUF chat model through
transformers as bench/gpu/peer_summarize.py loads and batches it (whose functions this uses):
dequantized to bf16, warpfold's system prompt for answers and its refusal sentence, greedy, no
repetition penalty (`warpfold ask`'s sampling), 160 new tokens, length-sorted batches under a
padded-token budget, left padding, SDPA.

    python3 peer_qa.py MODEL.gguf EMBEDDER_DIR PAGES.jsonl QUESTIONS.jsonl OUT.jsonl [--passages 5]
        [--max-new-tokens 160] [--batch 16] [--batch-tokens 65536] [--device cuda] [--dtype bf16]
        [--chunk-words 200] [--embed-batch 256] [--memory-gib G] [--cache DIR] [--limit N]

PAGES.jsonl is what `cargo run --release -p warpfold --example qa_documents -- OUT` writes (one line
per document: id, path, pages); a line without a path gets OUT/docs/ID.pdf or ID.txt beside it, as
that example names the files. QUESTIONS.jsonl is tests/data/qa/questions.jsonl (or some of its lines).

OUT.jsonl gets one line per question: the question's own fields and {"answer", "citations": [{"n",
"path", "page", "text"}] (the passages whose marks [n] the answer holds; none for an answer without
marks), "answerable" (false for the refusal), "passages": [{"path", "page", "text"}],
"prompt_tokens", "output_tokens"}, which bench/qa/score.py scores as it does warpfold's. The last
line on stdout is the timings as JSON: the embedder's load and the passages' embedding (the index),
retrieval (the questions embedded and the top k found), the chat model's load, generation (prompts
built, every batch answered), first_token_seconds (from the start of generation to the first token
of the first batch, the longest, taken with a streamer on that batch's `generate`) and questions per
second (over retrieval and generation, and over generation alone).
"""
import argparse
import json
import os
import re
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_summarize as ps  # noqa: E402
from peer_e2e import chunks_of  # noqa: E402

# crates/summarize/src/answer.rs: SYSTEM_PROMPT and NOT_FOUND.
SYSTEM = "You answer questions about the user's documents using only the numbered passages you are given."
NOT_FOUND = "Not in your documents."
MARK = re.compile(r"\[(\d+(?:\s*[,;]\s*\d+)*)\]")


def documents(pages_path):
    """The documents of PAGES.jsonl, each with the path warpfold reports for it."""
    docs = []
    folder = os.path.join(os.path.dirname(os.path.abspath(pages_path)), "docs")
    for line in open(pages_path, encoding="utf-8"):
        if not line.strip():
            continue
        d = json.loads(line)
        if not d.get("path"):
            pdf = os.path.join(folder, d["id"] + ".pdf")
            d["path"] = pdf if os.path.exists(pdf) or len(d["pages"]) > 1 else os.path.join(folder, d["id"] + ".txt")
        docs.append(d)
    return docs


def passages_of(docs, words):
    """Every page cut into runs of about `words` words, each with its document's path and its page (1-based)."""
    return [{"path": d["path"], "page": n, "text": chunk}
            for d in docs for n, page in enumerate(d["pages"], 1) for chunk in chunks_of(page, words)]


def embed_passages(st, passages, batch):
    """The passages' vectors, normalized (the vector store)."""
    return st.encode([p["text"] for p in passages], batch_size=batch, convert_to_numpy=True, normalize_embeddings=True)


def nearest(st, vectors, passages, questions, k, batch):
    """For each question, its `k` passages of highest cosine, best first."""
    q = st.encode(questions, batch_size=batch, convert_to_numpy=True, normalize_embeddings=True)
    scores = q @ vectors.T
    k = min(k, len(passages))
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    return [[passages[j] for j in row[np.argsort(-scores[i, row])]] for i, row in enumerate(top)]


def embedder(folder, device):
    """all-MiniLM-L6-v2 as sentence-transformers loads it, in f32 (the carried folder holds f16
    weights); a folder without sentence-transformers' files (modules.json) gets its settings by
    hand: 256 tokens at most, mean pooling, normalization."""
    from sentence_transformers import SentenceTransformer, models

    if os.path.exists(os.path.join(folder, "modules.json")):
        try:
            return SentenceTransformer(folder, device=device, model_kwargs={"dtype": torch.float32})
        except TypeError:
            return SentenceTransformer(folder, device=device).float()
    word = models.Transformer(folder, max_seq_length=256)  # the published model's sentence_bert_config.json
    dim = getattr(word, "get_embedding_dimension", None) or word.get_word_embedding_dimension
    pool = models.Pooling(dim(), pooling_mode="mean")
    return SentenceTransformer(modules=[word, pool, models.Normalize()], device=device).float()


def prompt(question, passages):
    """The question's user message: its passages numbered [1]..[k] with file name and page, then the
    question and what to do with it (warpfold's instruction for one passage, said of several)."""
    blocks = [f"Passage [{n}] ({os.path.basename(p['path'])}, page {p['page']}):\n{p['text'].strip()}"
              for n, p in enumerate(passages, 1)]
    return ("\n\n".join(blocks) + f"\n\nQuestion: {question.strip()}\n"
            "Answer the question only from the passages in one or two full sentences. Copy the names, numbers, amounts "
            "and dates exactly as the passages write them, and end each sentence with the number of the passage it "
            f"comes from, like [2]. If the passages do not say, reply only: {NOT_FOUND}")


def is_refusal(answer):
    return answer.strip().lower().startswith(NOT_FOUND.rstrip(".").lower())


def cited(answer, passages):
    """The passages whose marks ("[2]", "[1, 3]") the answer holds, in the order it first cites them."""
    seen = []
    for m in MARK.finditer(answer):
        for n in re.split(r"[,;]", m.group(1)):
            n = int(n)
            if 1 <= n <= len(passages) and n not in seen:
                seen.append(n)
    return [{"n": n, **passages[n - 1]} for n in seen]


class FirstToken:
    """A streamer that notes when `generate` hands out its first new tokens (its first `put` is the
    prompt's ids, the second the first token of every row)."""

    def __init__(self):
        self.puts = 0
        self.at = None

    def put(self, value):
        self.puts += 1
        if self.puts == 2:
            self.at = time.time()

    def end(self):
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gguf")
    ap.add_argument("embedder")
    ap.add_argument("pages")
    ap.add_argument("questions")
    ap.add_argument("out")
    ap.add_argument("--passages", type=int, default=5)
    ap.add_argument("--max-new-tokens", type=int, default=160)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--batch-tokens", type=int, default=65536)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f32"])
    ap.add_argument("--chunk-words", type=int, default=200)
    ap.add_argument("--embed-batch", type=int, default=256)
    ap.add_argument("--repetition-penalty", type=float, default=1.0)
    ap.add_argument("--memory-gib", type=float)
    ap.add_argument("--cache")
    ap.add_argument("--limit", type=int, help="only the first N questions")
    args = ap.parse_args()
    device = args.device
    cuda = device.startswith("cuda")
    if cuda:
        ps.cap_memory(args.memory_gib)

    docs = documents(args.pages)
    passages = passages_of(docs, args.chunk_words)
    asked = [json.loads(l) for l in open(args.questions, encoding="utf-8") if l.strip()][:args.limit]
    print(f"peer: {len(docs)} documents, {sum(len(d['pages']) for d in docs)} pages, {len(passages)} passages, "
          f"{len(asked)} questions", file=sys.stderr)

    # The index: the passages embedded.
    t = time.time()
    st = embedder(args.embedder, device)
    ps.sync(device)
    embed_load_s = time.time() - t
    t = time.time()
    vectors = embed_passages(st, passages, args.embed_batch)
    ps.sync(device)
    embed_s = time.time() - t

    # Retrieval: the questions embedded, cosine against every passage, the best k.
    t = time.time()
    found = nearest(st, vectors, passages, [a["question"] for a in asked], args.passages, args.embed_batch)
    retrieval_s = time.time() - t
    del st
    if cuda:
        torch.cuda.empty_cache()

    # The chat model, then the answers.
    tok, model, info = ps.load(args.gguf, args.cache, device, torch.bfloat16 if args.dtype == "bf16" else torch.float32)
    t_gen = time.time()
    prompts, ids = [], []
    for a, p in zip(asked, found):
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt(a["question"], p)}]
        prompts.append(tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))
        ids.append(tok(prompts[-1], add_special_tokens=False)["input_ids"])
    batches = ps.make_batches([len(x) for x in ids], args.batch, args.batch_tokens)
    generator = ps.Generator(tok, model, prompts, args.max_new_tokens, args.repetition_penalty, device)
    first = FirstToken()
    results = {}
    for b, group in enumerate(batches):
        results.update(generator.run(group, first if b == 0 else None))
        print(f"peer: batch {b + 1}/{len(batches)} ({len(group)} questions) done at {time.time() - t_gen:.1f} s",
              file=sys.stderr)
    ps.sync(device)
    gen_s = time.time() - t_gen

    with open(args.out, "w", encoding="utf-8") as f:
        for i, (a, p) in enumerate(zip(asked, found)):
            answer, n_out = results[i]
            refused = is_refusal(answer)
            line = dict(a)
            line.update(answer=answer, citations=[] if refused else cited(answer, p), answerable=not refused,
                        passages=p, prompt_tokens=len(ids[i]), output_tokens=n_out)
            f.write(json.dumps(line, ensure_ascii=False) + "\n")

    n = len(asked)
    print(json.dumps({
        "system": f"transformers {__import__('transformers').__version__}, sentence-transformers "
                  f"{__import__('sentence_transformers').__version__}, torch {torch.__version__}",
        "device": torch.cuda.get_device_name(0) if cuda else device, "dtype": args.dtype,
        "model": os.path.basename(args.gguf), "questions": n, "documents": len(docs), "passages_indexed": len(passages),
        "passages_per_question": k, "batches": len(batches), "oom_splits": generator.splits,
        "embed_load_seconds": embed_load_s, "embed_seconds": embed_s, "retrieval_seconds": retrieval_s,
        "load_seconds": info["load_seconds"], "load_from": info["load_from"], "generation_seconds": gen_s,
        "first_token_seconds": first.at - t_gen if first.at else None,
        "first_token_method": "streamer on the first (longest) batch's generate, from the start of generation",
        "questions_per_second": n / (retrieval_s + gen_s), "questions_per_second_generation": n / gen_s,
        "prompt_tokens": sum(map(len, ids)), "generated_tokens": sum(r[1] for r in results.values()),
        "refusals": sum(is_refusal(r[0]) for r in results.values()),
        "peak_gib": torch.cuda.max_memory_allocated() / 2**30 if cuda else None,
    }))


if __name__ == "__main__":
    main()
