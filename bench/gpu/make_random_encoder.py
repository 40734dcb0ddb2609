"""Writes a BERT-family encoder (BERT, MPNet) of a real configuration with random f16 weights (model.safetensors) next to
that model's own config, tokenizer and sentence-transformers files, on the GPU machine: for speed
runs when the real weights cannot be carried along (64 MiB per call). Random weights are honest for
speed (the same shapes, the same kernels); real-weight correctness is checked elsewhere
(BENCHMARKS.md: MiniLM against sentence-transformers).

  make_random_encoder.py META_DIR OUT_DIR     (META_DIR: the model folder without its weights)
"""
import shutil
import sys

import torch
from transformers import AutoConfig, AutoModel


def main(meta, out):
    shutil.copytree(meta, out, dirs_exist_ok=True)
    config = AutoConfig.from_pretrained(meta)
    torch.manual_seed(0)
    model = AutoModel.from_config(config, add_pooling_layer=False).to(torch.float16)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.02)
    model.save_pretrained(out, safe_serialization=True)
    print(f"random {config.model_type}: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters -> {out}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
