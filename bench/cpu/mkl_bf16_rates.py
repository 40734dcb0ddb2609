"""MKL's f32 and bf16 products on MiniLM's row-block shapes, one thread (issue 17).

Why: bf16x3 (crates/candle/src/bert_cpu.rs) replaces one f32 product of width K by one bf16 product
of width 3K; this measures what that trade is worth on this CPU before the encoder's own numbers:
`cblas_sgemm` against `cblas_gemm_bf16bf16f32` (plain, and against a right-hand side packed once, as
the encoder does), at the encoder's 256 rows and at 128-1024 rows. Values are arbitrary (rates do
not depend on them). Needs numpy (bench/.venv-peer has it) and MKL from `warpfold models fetch`.

    bench/.venv-peer/bin/python bench/cpu/mkl_bf16_rates.py [models/mkl/libmkl_rt.so.3]
"""
import ctypes
import sys
import time

import numpy as np

L = ctypes.CDLL(sys.argv[1] if len(sys.argv) > 1 else "models/mkl/libmkl_rt.so.3")
L.MKL_Set_Threading_Layer(1)  # sequential, as warpfold runs it
I, F, P = ctypes.c_int, ctypes.c_float, ctypes.c_void_p
ARGS = [I, I, I, I, I, I, F, P, I, P, I, F, P, I]
sgemm, bgemm, compute = L.cblas_sgemm, L.cblas_gemm_bf16bf16f32, L.cblas_gemm_bf16bf16f32_compute
for f in (sgemm, bgemm, compute):
    f.argtypes = ARGS
pack_size = L.cblas_gemm_bf16bf16f32_pack_get_size
pack_size.argtypes, pack_size.restype = [I, I, I, I], ctypes.c_size_t
pack = L.cblas_gemm_bf16bf16f32_pack
pack.argtypes = [I, I, I, I, I, I, P, I, P]
ROW, NT, T, B, PACKED = 101, 111, 112, 162, 151


def seconds(f, n=30):
    f()
    t0 = time.perf_counter()
    for _ in range(n):
        f()
    return (time.perf_counter() - t0) / n


# (inputs K, outputs N) of q/k/v, attention output, feed-forward in and out.
SHAPES = [(384, 1152), (384, 384), (384, 1536), (1536, 384)]
print("rows  K     N     sgemm GF/s  bf16 K GF/s  bf16 3K packed GF/s  3K packed time / sgemm time")
for m in (128, 256, 512, 1024):
    for k, n in SHAPES:
        a = np.random.rand(m, k).astype(np.float32)
        w = np.random.rand(n, k).astype(np.float32)
        c = np.zeros((m, n), np.float32)
        ts = seconds(lambda: sgemm(ROW, NT, T, m, n, k, 1.0, a.ctypes.data, k, w.ctypes.data, k, 0.0, c.ctypes.data, n))
        a3 = np.full((m, 3 * k), 0x3F80, np.uint16)
        w3 = np.full((n, 3 * k), 0x3F80, np.uint16)
        tb = seconds(lambda: bgemm(ROW, NT, T, m, n, k, 1.0, a3.ctypes.data, 3 * k, w3.ctypes.data, 3 * k, 0.0, c.ctypes.data, n))
        buf = np.zeros(pack_size(B, m, n, 3 * k) // 2 + 64, np.uint16)
        pack(ROW, B, T, m, n, 3 * k, w3.ctypes.data, 3 * k, buf.ctypes.data)
        tp = seconds(lambda: compute(ROW, NT, PACKED, m, n, 3 * k, 1.0, a3.ctypes.data, 3 * k, buf.ctypes.data, 3 * k, 1.0, c.ctypes.data, n))
        flop = 2 * m * n * k
        print(f"{m:5d} {k:5d} {n:5d} {flop / ts / 1e9:10.0f} {flop / tb / 1e9:12.0f} {3 * flop / tp / 1e9:20.0f} {tp / ts:28.2f}")
