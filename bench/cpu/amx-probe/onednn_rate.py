"""oneDNN (torch.nn.functional.linear in bf16, one thread) on the same shapes as mkl_rate.py."""
import torch, time
torch.set_num_threads(1)
def rate(m,n,k,reps=300):
    a=torch.randn(m,k,dtype=torch.bfloat16); b=torch.randn(n,k,dtype=torch.bfloat16)
    lin=torch.nn.functional.linear
    for _ in range(5): lin(a,b)
    t=time.perf_counter()
    for _ in range(reps): lin(a,b)
    d=(time.perf_counter()-t)/reps
    return 2*m*n*k/d/1e12
for rep in range(2):
  for (m,n,k) in [(256,1152,1152),(256,384,1152),(256,1536,1152),(256,384,4608)]:
    print(m,n,k,"oneDNN %.2f TFLOP/s"%rate(m,n,k))
