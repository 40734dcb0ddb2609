"""What the matmul-rate scripts share: the 7B's projection shapes (in, out) and a CUDA timer."""
import time

import torch

SHAPES = {"qkv": (3584, 4608), "o_proj": (3584, 3584), "gate_up": (3584, 37888), "down": (18944, 3584), "lm_head": (3584, 152064)}


def rate(fn, flop, reps=20, warmup=3):
    """TFLOP/s of `fn` (which does `flop` floating-point operations), over `reps` calls after `warmup`."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    return flop * reps / (time.perf_counter() - t) / 1e12


def operands(rows):
    """For each row count and projection: (rows, name, x, w, flop), x · wᵀ in bf16 on the GPU."""
    for m in rows:
        for name, (k, n) in SHAPES.items():
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02
            yield m, name, x, w, 2.0 * m * k * n
