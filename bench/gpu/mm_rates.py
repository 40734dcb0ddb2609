"""The 7B's projection matmuls (x · Wᵀ, bf16, M rows) timed through the cuBLAS entry points a program
can use: torch.mm (cublasGemmEx / cublasLt), torch.bmm with a batch of one (cublasGemmStridedBatchedEx,
the call candle makes), and each with bf16 reduced-precision reductions allowed and not. Prints
TFLOP/s per shape. Usage: python mm_rates.py [M ...]"""
import sys

import torch

from mm_common import operands, rate

rows = [int(a) for a in sys.argv[1:]] or [12288, 16384]
dev = torch.device("cuda")
print(torch.__version__, torch.cuda.get_device_name(), "cublasLt preferred:", torch.backends.cuda.preferred_blas_library())

for m, name, x, w, flop in operands(rows):
    out = {}
    for reduced in (True, False):
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = reduced
        out[f"mm{'' if reduced else ' exact'}"] = rate(lambda: torch.mm(x, w.t()), flop)
        out[f"bmm1{'' if reduced else ' exact'}"] = rate(lambda: torch.bmm(x[None], w.t()[None]), flop)
    print(f"M={m} {name:8s} " + "  ".join(f"{k}: {v:6.1f}" for k, v in out.items()), flush=True)
    del x, w
# The large square for reference.
a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
print(f"8192^3 mm: {rate(lambda: a @ a, 2.0 * 8192**3):.1f} TFLOP/s")
