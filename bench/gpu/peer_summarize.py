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
"""
import json
import os
import sys
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

# crates/summarize/src/lib.rs: SYSTEM_PROMPT and instruction() for a whole document.
SYSTEM = "You are a helpful assistant that writes short, faithful summaries of documents."
WHOLE = {
    "detailed": "Summarize the following document in one paragraph. Begin with one sentence on what it is about, "
    "then state every name, date, number and amount it gives, each with what it refers to, written exactly as stated.\n\n",
    "brief": "Summarize the following document in a few sentences. Say what it is about, and keep its key facts: "
    "names, numbers, dates and amounts.\n\n",
}


def arg(name, default, cast=str):
    return cast(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


def main():
    gguf, folder, out = sys.argv[1], sys.argv[2], sys.argv[3]
    style = arg("--style", "detailed")
    max_new = arg("--max-new-tokens", 160, int)
    batch = arg("--batch", 16, int)
    batch_tokens = arg("--batch-tokens", 65536, int)
    memory_gib = arg("--memory-gib", None, float)
    if memory_gib:
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, memory_gib * 2**30 / total))
    t0 = time.time()
    directory, name = os.path.split(os.path.abspath(gguf))
    tok = AutoTokenizer.from_pretrained(directory, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(directory, gguf_file=name, torch_dtype=torch.bfloat16).to("cuda").eval()
    if tok.chat_template is None:
        # The GGUF's template did not come through: the ChatML the model was trained on.
        tok.chat_template = ("{% for m in messages %}{{'<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n'}}{% endfor %}"
                             "{% if add_generation_prompt %}{{'<|im_start|>assistant\\n'}}{% endif %}")
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    load_s = time.time() - t0

    t1 = time.time()
    paths = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".txt"))
    prompts = []
    for p in paths:
        text = open(p, encoding="utf-8").read()
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": WHOLE[style] + text}]
        prompts.append(tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))
    ids = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
    order = sorted(range(len(paths)), key=lambda i: -len(ids[i]))
    # Batches of similar lengths under the padded-token budget (the longest sets the width).
    batches, current = [], []
    for i in order:
        width = len(ids[current[0]]) if current else len(ids[i])
        if current and (len(current) >= batch or (len(current) + 1) * width > batch_tokens):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    results = {}
    splits = 0

    def run(group):
        nonlocal splits
        enc = tok([prompts[i] for i in group], return_tensors="pt", padding=True, add_special_tokens=False).to("cuda")
        try:
            with torch.inference_mode():
                gen = model.generate(**enc, max_new_tokens=max_new, do_sample=False, repetition_penalty=1.1,
                                     pad_token_id=tok.pad_token_id)
        except torch.OutOfMemoryError:
            if len(group) == 1:
                raise
            splits += 1
            torch.cuda.empty_cache()
            half = len(group) // 2
            run(group[:half])
            run(group[half:])
            return
        new = gen[:, enc["input_ids"].shape[1]:]
        for row, i in enumerate(group):
            toks = [t for t in new[row].tolist() if t != tok.pad_token_id]
            results[i] = (tok.decode(toks, skip_special_tokens=True).strip(), len(toks))

    for group in batches:
        run(group)
    torch.cuda.synchronize()
    run_s = time.time() - t1
    with open(out, "w") as f:
        for i, p in enumerate(paths):
            summary, n = results[i]
            f.write(json.dumps({"path": p, "summary": summary, "tokens_in": len(ids[i]), "tokens_out": n}) + "\n")
    print(json.dumps({
        "system": "transformers " + __import__("transformers").__version__ + ", torch " + torch.__version__,
        "model": name, "documents": len(paths), "batches": len(batches), "oom_splits": splits,
        "load_seconds": load_s, "seconds": run_s, "documents_per_minute": 60 * len(paths) / run_s,
        "prompt_tokens": sum(map(len, ids)), "generated_tokens": sum(r[1] for r in results.values()),
        "peak_gib": torch.cuda.max_memory_allocated() / 2**30, "memory_gib_cap": memory_gib,
    }))


if __name__ == "__main__":
    main()
