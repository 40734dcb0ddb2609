"""The summarization pipeline a user would assemble with Hugging Face transformers, as warpfold's peer
(issue 15): the same GGUF chat model (transformers dequantizes it to bf16 through the `gguf` package),
each document whole in one prompt (the model's context holds it), the same system prompt and
instruction as warpfold's, greedy with the same repetition penalty and token budget, and the
strongest way to batch it: documents sorted by length, batches under a padded-token budget, left
padding, SDPA attention.

    python3 peer_summarize.py MODEL.gguf DIR OUT.jsonl [--style detailed|brief] [--max-new-tokens 160]
        [--batch 16] [--batch-tokens 65536] [--memory-gib 8]

Writes one line per document, {"path", "summary", "tokens_in", "tokens_out"}, as `warpfold summarize
--json` does, and prints the timings as JSON on the last line. `--memory-gib` caps what PyTorch may
allocate on the GPU (the gaming-card case); a batch that runs out of memory is split in two.

The pieces (load, prompts, batches, generation) are functions that bench/gpu/peer_e2e.py (the
end-to-end peer: PDFs, embeddings, summaries) shares.
"""
import json
import os
import sys
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

# crates/summarize/src/lib.rs: SYSTEM_PROMPT, and instruction() for a whole document: DETAILED_WHOLE
# and "." for the detailed style (which `--prompts auto` picks for the 1.5B model), then "\n\n" and
# the text.
SYSTEM = "You are a helpful assistant that writes short, faithful summaries of documents."
WHOLE = {
    "detailed": "Summarize the following document in one paragraph. Begin with one sentence on what it is about, "
    "then state every name, date, number and amount it gives, each with what it refers to, written exactly as stated.\n\n",
    "brief": "Summarize the following document in a few sentences. Say what it is about, and keep its key facts: "
    "names, numbers, dates and amounts.\n\n",
}
# The ChatML the model was trained on, for a GGUF whose template did not come through.
CHATML = ("{% for m in messages %}{{'<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n'}}{% endfor %}"
          "{% if add_generation_prompt %}{{'<|im_start|>assistant\\n'}}{% endif %}")


def arg(name, default, cast=str):
    return cast(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


def cap_memory(memory_gib):
    """Caps what PyTorch may allocate on the GPU (None: the whole card)."""
    if memory_gib:
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, memory_gib * 2**30 / total))


def sync(device="cuda"):
    """Waits for the GPU's queued work (nothing to wait for on the CPU)."""
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def load(gguf, cache=None, device="cuda", dtype=torch.bfloat16):
    """The tokenizer (left padding) and the model on `device` (the GPU) in `dtype` (bf16), from the GGUF, or
    from `cache` (a folder save_pretrained wrote from an earlier load of the same GGUF) when it holds one. A load
    from the GGUF with `cache` given saves there afterwards. Returns (tok, model, info) with the
    seconds of the load and of the save apart. The cache is written beside and renamed into place, so
    a call killed while saving leaves none."""
    t0 = time.time()
    source = "gguf"
    if cache and os.path.exists(os.path.join(cache, "config.json")):
        try:
            tok = AutoTokenizer.from_pretrained(cache)
            model = AutoModelForCausalLM.from_pretrained(cache, dtype=dtype).to(device).eval()
            source = "cache " + cache
        except Exception as e:  # a cache cut short (a call killed while saving): the GGUF again
            print(f"peer: the cache {cache} did not load ({e}); loading the GGUF", file=sys.stderr)
            t0 = time.time()
    if source == "gguf":
        directory, name = os.path.split(os.path.abspath(gguf))
        tok = AutoTokenizer.from_pretrained(directory, gguf_file=name)
        model = AutoModelForCausalLM.from_pretrained(directory, gguf_file=name, dtype=dtype).to(device).eval()
    if tok.chat_template is None:
        tok.chat_template = CHATML
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    sync(device)
    load_s = time.time() - t0
    save_s = None
    if cache and source == "gguf":
        t1 = time.time()
        try:
            tmp = cache + ".partial"
            model.save_pretrained(tmp)
            tok.save_pretrained(tmp)
            if os.path.exists(cache):
                __import__("shutil").rmtree(cache)
            os.rename(tmp, cache)
            save_s = time.time() - t1
        except Exception as e:
            print(f"peer: saving the cache {cache} failed: {e}", file=sys.stderr)
    return tok, model, {"load_seconds": load_s, "load_from": source, "cache_save_seconds": save_s}


def prompts_for(tok, texts, style="detailed"):
    """Each text's chat prompt (warpfold's system prompt and whole-document instruction) and its ids."""
    prompts = []
    for text in texts:
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": WHOLE[style] + text}]
        prompts.append(tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))
    ids = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
    return prompts, ids


def make_batches(lengths, batch, batch_tokens):
    """Indices sorted by length, longest first, in batches of at most `batch` whose padded size (the
    longest sets the width) stays under `batch_tokens`."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches, current = [], []
    for i in order:
        width = lengths[current[0]] if current else lengths[i]
        if current and (len(current) >= batch or (len(current) + 1) * width > batch_tokens):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


class Generator:
    """Batched greedy generation, left padded; a batch that runs out of memory is split in two.
    `run(group)` returns {index: (summary, tokens_out)} for the group; `streamer` goes to `generate`."""

    def __init__(self, tok, model, prompts, max_new=160, repetition_penalty=1.1, device="cuda"):
        self.tok, self.model, self.prompts, self.max_new = tok, model, prompts, max_new
        self.repetition_penalty, self.device = repetition_penalty, device
        self.splits = 0

    def run(self, group, streamer=None):
        tok = self.tok
        enc = tok([self.prompts[i] for i in group], return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
        try:
            with torch.inference_mode():
                gen = self.model.generate(**enc, max_new_tokens=self.max_new, do_sample=False,
                                          repetition_penalty=self.repetition_penalty, pad_token_id=tok.pad_token_id,
                                          streamer=streamer)
        except torch.OutOfMemoryError:
            if len(group) == 1:
                raise
            self.splits += 1
            del enc
            torch.cuda.empty_cache()
            half = len(group) // 2
            out = self.run(group[:half], streamer)
            out.update(self.run(group[half:], streamer))
            return out
        new = gen[:, enc["input_ids"].shape[1]:]
        out = {}
        for row, i in enumerate(group):
            toks = [t for t in new[row].tolist() if t != tok.pad_token_id]
            out[i] = (tok.decode(toks, skip_special_tokens=True).strip(), len(toks))
        return out


def main():
    gguf, folder, out = sys.argv[1], sys.argv[2], sys.argv[3]
    style = arg("--style", "detailed")
    max_new = arg("--max-new-tokens", 160, int)
    batch = arg("--batch", 16, int)
    batch_tokens = arg("--batch-tokens", 65536, int)
    memory_gib = arg("--memory-gib", None, float)
    cap_memory(memory_gib)
    tok, model, info = load(gguf)

    t1 = time.time()
    paths = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".txt"))
    prompts, ids = prompts_for(tok, [open(p, encoding="utf-8").read() for p in paths], style)
    batches = make_batches([len(x) for x in ids], batch, batch_tokens)
    generator = Generator(tok, model, prompts, max_new)
    results = {}
    for group in batches:
        results.update(generator.run(group))
    torch.cuda.synchronize()
    run_s = time.time() - t1
    with open(out, "w") as f:
        for i, p in enumerate(paths):
            summary, n = results[i]
            f.write(json.dumps({"path": p, "summary": summary, "tokens_in": len(ids[i]), "tokens_out": n}) + "\n")
    print(json.dumps({
        "system": "transformers " + __import__("transformers").__version__ + ", torch " + torch.__version__,
        "model": os.path.basename(gguf), "documents": len(paths), "batches": len(batches), "oom_splits": generator.splits,
        "load_seconds": info["load_seconds"], "seconds": run_s, "documents_per_minute": 60 * len(paths) / run_s,
        "prompt_tokens": sum(map(len, ids)), "generated_tokens": sum(r[1] for r in results.values()),
        "peak_gib": torch.cuda.max_memory_allocated() / 2**30, "memory_gib_cap": memory_gib,
    }))


if __name__ == "__main__":
    main()
