"""Reference logits from Hugging Face transformers for the GPU test
`gpu_decoder_logits_match_transformers_on_the_same_weights` (crates/candle/src/gpu_tests.rs).

  hf_logits.py MODEL_DIR [--steps 8]   ->  MODEL_DIR-reference.safetensors

For a few prompts of mixed lengths (random token ids, seeded) and a continuation of `steps` tokens,
each sequence alone through transformers: the logits at the prompt's last token and at each
continuation token (steps + 1 rows), once in f32 (the reference) and once in bf16 (how far bf16
arithmetic alone moves them). warpfold's test runs the same prompts packed, then decodes the same
continuation tokens in a batch, and compares.
"""
import argparse

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM

PROMPT_LENGTHS = [5, 37, 200, 611]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--steps", type=int, default=8)
    args = ap.parse_args()
    g = torch.Generator().manual_seed(1234)
    out = {}
    models = {}
    for dtype in (torch.float32, torch.bfloat16):
        models[dtype] = AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype, attn_implementation="sdpa").cuda().eval()
    vocab = models[torch.float32].config.vocab_size
    for i, n in enumerate(PROMPT_LENGTHS):
        prompt = torch.randint(0, vocab, (n,), generator=g)
        cont = torch.randint(0, vocab, (args.steps,), generator=g)
        ids = torch.cat([prompt, cont]).unsqueeze(0).cuda()
        out[f"prompt.{i}"] = prompt.to(torch.int64)
        out[f"continuation.{i}"] = cont.to(torch.int64)
        for dtype, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
            with torch.no_grad():
                logits = models[dtype](input_ids=ids).logits[0, n - 1 : n + args.steps].float().cpu().contiguous()
            out[f"logits_{name}.{i}"] = logits
    path = args.model.rstrip("/") + "-reference.safetensors"
    save_file(out, path)
    d = max((out[f"logits_bf16.{i}"] - out[f"logits_f32.{i}"]).abs().max().item() for i in range(len(PROMPT_LENGTHS)))
    print(f"{path}: {len(PROMPT_LENGTHS)} prompts, {args.steps} steps, transformers bf16 vs f32 max |diff| {d:.4f}")


if __name__ == "__main__":
    main()
