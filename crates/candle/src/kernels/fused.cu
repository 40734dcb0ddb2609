// warpfold's own CUDA kernels: two operations that candle composes from several kernels (and, for
// strided inputs, slow index arithmetic), each done here in one pass over memory. Compiled to PTX by
// crates/candle/build.rs with the `cuda` feature; loaded and launched by src/fused.rs.
//
// Indices are 64-bit: a bin of a large model has activations of more than 2^32 elements.

#include "common.cuh"

// SwiGLU on the fused gate-up projection: `gate_up` is (rows, 2 * inter), gate in the first half of
// each row and up in the second; out (rows, inter) = silu(gate) * up, computed in f32, rounded once.
template <typename T>
__device__ void silu_mul(const T* __restrict__ gate_up, T* __restrict__ out, uint64_t rows, uint64_t inter) {
  const uint64_t n = rows * inter;
  const uint64_t stride = (uint64_t)blockDim.x * gridDim.x;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const uint64_t r = i / inter;
    const uint64_t j = i - r * inter;
    const T* row = gate_up + r * 2 * inter;
    const float g = to_float(row[j]);
    const float u = to_float(row[inter + j]);
    out[i] = from_float<T>(g / (1.0f + __expf(-g)) * u);
  }
}

extern "C" __global__ void silu_mul_bf16(const __nv_bfloat16* gate_up, __nv_bfloat16* out, uint64_t rows, uint64_t inter) {
  silu_mul(gate_up, out, rows, inter);
}
extern "C" __global__ void silu_mul_f16(const __half* gate_up, __half* out, uint64_t rows, uint64_t inter) {
  silu_mul(gate_up, out, rows, inter);
}
extern "C" __global__ void silu_mul_f32(const float* gate_up, float* out, uint64_t rows, uint64_t inter) {
  silu_mul(gate_up, out, rows, inter);
}

// Running (max, sum of exp(x - max)) pairs, merged.
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
  const float mm = fmaxf(m, m2);
  if (mm == -INFINITY) return;  // both empty
  s = (m == -INFINITY ? 0.0f : s * __expf(m - mm)) + (m2 == -INFINITY ? 0.0f : s2 * __expf(m2 - mm));
  m = mm;
}

// log p(target) of each row of logits (rows, vocab): logits[target] - logsumexp(logits), in f32, in
// one read of the row (an online max and sum per thread, then a block reduction). One block per row;
// blockDim.x a multiple of 32, at most 1024.
template <typename T>
__device__ void target_log_prob(const T* __restrict__ logits, const uint32_t* __restrict__ targets, float* __restrict__ out, uint64_t vocab) {
  const uint64_t row = blockIdx.x;
  const T* x = logits + row * vocab;
  float m = -INFINITY, s = 0.0f;
  for (uint64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
    const float v = to_float(x[j]);
    if (v > m) {
      s = (m == -INFINITY ? 0.0f : s * __expf(m - v)) + 1.0f;
      m = v;
    } else {
      s += __expf(v - m);
    }
  }
  for (int off = 16; off > 0; off >>= 1) {
    const float m2 = __shfl_down_sync(0xffffffffu, m, off);
    const float s2 = __shfl_down_sync(0xffffffffu, s, off);
    merge(m, s, m2, s2);
  }
  __shared__ float warp_m[32];
  __shared__ float warp_s[32];
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  if (lane == 0) {
    warp_m[warp] = m;
    warp_s[warp] = s;
  }
  __syncthreads();
  if (warp == 0) {
    const int warps = blockDim.x / 32;
    m = lane < warps ? warp_m[lane] : -INFINITY;
    s = lane < warps ? warp_s[lane] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) {
      const float m2 = __shfl_down_sync(0xffffffffu, m, off);
      const float s2 = __shfl_down_sync(0xffffffffu, s, off);
      merge(m, s, m2, s2);
    }
    if (lane == 0) out[row] = to_float(x[targets[row]]) - (m + logf(s));
  }
}

extern "C" __global__ void target_log_prob_bf16(const __nv_bfloat16* logits, const uint32_t* targets, float* out, uint64_t vocab) {
  target_log_prob(logits, targets, out, vocab);
}
extern "C" __global__ void target_log_prob_f16(const __half* logits, const uint32_t* targets, float* out, uint64_t vocab) {
  target_log_prob(logits, targets, out, vocab);
}
extern "C" __global__ void target_log_prob_f32(const float* logits, const uint32_t* targets, float* out, uint64_t vocab) {
  target_log_prob(logits, targets, out, vocab);
}

// The key/value pool's writes: row i of `src` (n, width) goes to row rows[i] of `dst`, every
// element on its own thread (candle's scatter loops over the rows inside one thread per column,
// which made an 8,192-token prefill's cache writes 256 threads wide). Elements are copied as raw
// 2- or 4-byte words, so one kernel serves bf16 and f16 (and f32). Rows past `dst_rows` are
// skipped: the caller checks them; the kernel must not write outside the pool whatever it gets.
template <typename T>
__device__ void scatter_rows(const uint32_t* __restrict__ rows, const T* __restrict__ src, T* __restrict__ dst, uint64_t n,
                             uint64_t width, uint64_t dst_rows) {
  const uint64_t total = n * width;
  const uint64_t stride = (uint64_t)blockDim.x * gridDim.x;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
    const uint64_t r = i / width;
    const uint64_t row = rows[r];
    if (row < dst_rows) {
      dst[row * width + (i - r * width)] = src[i];
    }
  }
}

extern "C" __global__ void scatter_rows_u16(const uint32_t* rows, const uint16_t* src, uint16_t* dst, uint64_t n, uint64_t width,
                                            uint64_t dst_rows) {
  scatter_rows(rows, src, dst, n, width, dst_rows);
}
extern "C" __global__ void scatter_rows_u32(const uint32_t* rows, const uint32_t* src, uint32_t* dst, uint64_t n, uint64_t width,
                                            uint64_t dst_rows) {
  scatter_rows(rows, src, dst, n, width, dst_rows);
}
