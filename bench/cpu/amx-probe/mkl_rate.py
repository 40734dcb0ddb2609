"""MKL's bf16 product (cblas_gemm_bf16bf16f32, plain and against a packed right-hand side) on the
fused CPU layers' block shapes: 256 rows (bert_cpu.rs's rows per task) of all-MiniLM-L6-v2 in bf16x3
(K tripled: 384 -> 1152, 1536 -> 4608). One thread, MKL's sequential layer, as warpfold calls it.
Run from the repository root with the peer's venv: bench/.venv-peer/bin/python bench/cpu/amx-probe/mkl_rate.py
"""
import ctypes, numpy as np, time, os
os.environ.setdefault("MKL_THREADING_LAYER","SEQUENTIAL")
lib=ctypes.CDLL(os.path.abspath("models/mkl/libmkl_rt.so.3"))
lib.MKL_Set_Threading_Layer(1) if hasattr(lib,'MKL_Set_Threading_Layer') else None
ROW=101; NT=111; TR=112; PACKED=151; BMAT=162
c_i=ctypes.c_int; c_f=ctypes.c_float; P=ctypes.c_void_p
lib.cblas_gemm_bf16bf16f32.argtypes=[c_i,c_i,c_i,c_i,c_i,c_i,c_f,P,c_i,P,c_i,c_f,P,c_i]
lib.cblas_gemm_bf16bf16f32_pack_get_size.restype=ctypes.c_size_t
lib.cblas_gemm_bf16bf16f32_pack_get_size.argtypes=[c_i,c_i,c_i,c_i]
lib.cblas_gemm_bf16bf16f32_pack.argtypes=[c_i,c_i,c_i,c_i,c_i,c_i,P,c_i,P]
lib.cblas_gemm_bf16bf16f32_compute.argtypes=[c_i,c_i,c_i,c_i,c_i,c_i,c_f,P,c_i,P,c_i,c_f,P,c_i]
def rate(m,n,k,reps=20):
    a=(np.random.randn(m,k).astype(np.float32).view(np.uint32)>>16).astype(np.uint16)
    w=(np.random.randn(n,k).astype(np.float32).view(np.uint32)>>16).astype(np.uint16)
    c=np.zeros((m,n),np.float32)
    size=lib.cblas_gemm_bf16bf16f32_pack_get_size(BMAT,m,n,k)
    buf=np.zeros(size//2+64,np.uint16)
    lib.cblas_gemm_bf16bf16f32_pack(ROW,BMAT,TR,m,n,k,w.ctypes.data,k,buf.ctypes.data)
    out=[]
    for packed in (False,True):
        def go():
            if packed: lib.cblas_gemm_bf16bf16f32_compute(ROW,NT,PACKED,m,n,k,1.0,a.ctypes.data,k,buf.ctypes.data,k,0.0,c.ctypes.data,n)
            else: lib.cblas_gemm_bf16bf16f32(ROW,NT,TR,m,n,k,1.0,a.ctypes.data,k,w.ctypes.data,k,0.0,c.ctypes.data,n)
        for _ in range(3): go()
        t=time.perf_counter()
        for _ in range(reps): go()
        d=(time.perf_counter()-t)/reps
        out.append(2*m*n*k/d/1e12)
    return out
for rep in range(2):
  for (m,n,k) in [(256,1152,1152),(256,384,1152),(256,1536,1152),(256,384,4608)]:
    print(m,n,k, "MKL plain %.2f packed %.2f TFLOP/s"%tuple(rate(m,n,k,reps=300)))
