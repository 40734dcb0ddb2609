"""Does cuBLAS leave matmul rate on the table for the 7B's shapes? Times each projection (x · Wᵀ,
bf16, M rows) with torch's default cuBLAS call, with cublasLt preferred, and with PyTorch's TunableOp,
which tries every cuBLAS/cublasLt algorithm for the shape and keeps the fastest. If the tuned rate is
well above the default, picking algorithms per shape would speed the 7B up; if not, cuBLAS's heuristic
is already at the GPU's rate for these shapes. Prints TFLOP/s. Usage: python mm_tuned.py [M ...]"""
import os, sys

import torch

from mm_common import operands, rate

rows = [int(a) for a in sys.argv[1:]] or [12288]
print(torch.__version__, torch.cuda.get_device_name(), flush=True)

tunable = torch.cuda.tunable
tunable.set_filename(os.path.join(os.environ.get("OUT", "/tmp"), "tunableop_results.csv"))
tunable.set_max_tuning_duration(200)
tunable.set_max_tuning_iterations(100)
for m, name, x, w, flop in operands(rows):
    out = {}
    tunable.enable(False)
    torch.backends.cuda.preferred_blas_library("cublas")
    out["cublas"] = rate(lambda: torch.mm(x, w.t()), flop, reps=30, warmup=5)
    torch.backends.cuda.preferred_blas_library("cublaslt")
    out["cublaslt"] = rate(lambda: torch.mm(x, w.t()), flop, reps=30, warmup=5)
    torch.backends.cuda.preferred_blas_library("cublas")
    tunable.enable(True)
    tunable.tuning_enable(True)
    torch.mm(x, w.t())  # tunes this shape
    torch.cuda.synchronize()
    tunable.tuning_enable(False)
    out["tuned"] = rate(lambda: torch.mm(x, w.t()), flop, reps=30, warmup=5)
    tunable.enable(False)
    print(f"M={m} {name:8s} " + "  ".join(f"{k}: {v:6.1f}" for k, v in out.items()), flush=True)
    del x, w
