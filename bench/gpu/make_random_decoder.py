"""Writes a decoder of a real architecture with random bf16 weights (config.json + model.safetensors),
on the GPU machine, for speed benchmarks: the same file is loaded by warpfold and by transformers.

  make_random_decoder.py qwen2.5-7b|smollm2-360m|smollm2-135m OUT_DIR

The configurations are those of Qwen/Qwen2.5-7B, HuggingFaceTB/SmolLM2-360M and -135M (written out here: the
machine has no network). Random weights are honest for speed; correctness is checked by comparing
both systems' scores on the same weights.
"""
import sys

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

CONFIGS = {
    "qwen2.5-7b": (Qwen2Config, Qwen2ForCausalLM, dict(
        vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
        num_attention_heads=28, num_key_value_heads=4, max_position_embeddings=131072, rope_theta=1000000.0,
        rms_norm_eps=1e-6, tie_word_embeddings=False, hidden_act="silu", use_sliding_window=False)),
    "smollm2-360m": (LlamaConfig, LlamaForCausalLM, dict(
        vocab_size=49152, hidden_size=960, intermediate_size=2560, num_hidden_layers=32,
        num_attention_heads=15, num_key_value_heads=5, max_position_embeddings=8192, rope_theta=100000.0,
        rms_norm_eps=1e-5, tie_word_embeddings=True, hidden_act="silu")),
    "smollm2-135m": (LlamaConfig, LlamaForCausalLM, dict(
        vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
        num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192, rope_theta=100000.0,
        rms_norm_eps=1e-5, tie_word_embeddings=True, hidden_act="silu", bos_token_id=1, eos_token_id=2)),
}


def main(name, out):
    config_cls, model_cls, kwargs = CONFIGS[name]
    config = config_cls(**kwargs)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = model_cls(config).to(torch.bfloat16)
    # Small weights keep activations in range over many layers (as trained weights are).
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.02)
    model.save_pretrained(out, safe_serialization=True, max_shard_size="100GB")
    print(f"{name}: {sum(p.numel() for p in model.parameters()) / 1e9:.2f}B parameters -> {out}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
