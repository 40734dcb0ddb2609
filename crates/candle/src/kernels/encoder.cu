// The BERT encoder's element-wise steps on CUDA, each fused into one pass over memory: a layer runs
// its four matmuls (cuBLAS, through candle), FlashAttention-2, the q/k/v split with its bias (split_qkv
// in fused.cu, shared with the decoder) and three of these kernels, where
// candle's ops take a bias add, three q/k/v copies, two residual adds, two layer norms, a bias add
// and a GELU. Compiled to PTX by crates/candle/build.rs with the `cuda` feature; launched by
// src/encoder_kernels.rs. Math in f32, one rounding to the storage type at the end.

#include "common.cuh"

// out = layer_norm(y + bias + residual) over rows of `width`, one warp per row (blocks of 8 warps):
// the row's values stay in the warp's L1 between the mean, variance and write passes.
template <typename T>
__device__ void bias_residual_layer_norm(const T* __restrict__ y, const T* __restrict__ bias, const T* __restrict__ residual,
                                         const T* __restrict__ gamma, const T* __restrict__ beta, T* __restrict__ out, uint64_t rows,
                                         uint64_t width, float eps) {
  const uint64_t row = (uint64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const unsigned lane = threadIdx.x % 32;
  if (row >= rows) return;
  const T* yr = y + row * width;
  const T* rr = residual + row * width;
  T* o = out + row * width;
  constexpr int V = Pack<T>::N;
  if (width % V == 0 && aligned16(y) && aligned16(bias) && aligned16(residual) && aligned16(gamma) && aligned16(beta) &&
      aligned16(out)) {
    // In 16-byte packs (see Pack): the same three passes, each lane over its own packs.
    const uint64_t packs = width / V;
    auto summed = [&](uint64_t c, float* v) {
      const Pack<T> a = load_pack(yr + c * V), b = load_pack(bias + c * V), r = load_pack(rr + c * V);
#pragma unroll
      for (int e = 0; e < V; e++) v[e] = a.get(e) + b.get(e) + r.get(e);
    };
    float v[V];
    float sum = 0.0f;
    for (uint64_t c = lane; c < packs; c += 32) {
      summed(c, v);
#pragma unroll
      for (int e = 0; e < V; e++) sum += v[e];
    }
    const float mean = warp_sum(sum) / (float)width;
    float sq = 0.0f;
    for (uint64_t c = lane; c < packs; c += 32) {
      summed(c, v);
#pragma unroll
      for (int e = 0; e < V; e++) sq += (v[e] - mean) * (v[e] - mean);
    }
    const float inv = rsqrtf(warp_sum(sq) / (float)width + eps);
    for (uint64_t c = lane; c < packs; c += 32) {
      summed(c, v);
      const Pack<T> g = load_pack(gamma + c * V), b = load_pack(beta + c * V);
      Pack<T> r;
#pragma unroll
      for (int e = 0; e < V; e++) r.set(e, (v[e] - mean) * inv * g.get(e) + b.get(e));
      store_pack(o + c * V, r);
    }
    return;
  }
  float sum = 0.0f;
  for (uint64_t j = lane; j < width; j += 32) sum += to_float(yr[j]) + to_float(bias[j]) + to_float(rr[j]);
  const float mean = warp_sum(sum) / (float)width;
  float sq = 0.0f;
  for (uint64_t j = lane; j < width; j += 32) {
    const float d = to_float(yr[j]) + to_float(bias[j]) + to_float(rr[j]) - mean;
    sq += d * d;
  }
  const float inv = rsqrtf(warp_sum(sq) / (float)width + eps);
  for (uint64_t j = lane; j < width; j += 32) {
    const float v = to_float(yr[j]) + to_float(bias[j]) + to_float(rr[j]);
    o[j] = from_float<T>((v - mean) * inv * to_float(gamma[j]) + to_float(beta[j]));
  }
}

// The activation: 0 = GELU (erf), 1 = GELU (tanh), 2 = ReLU.
__device__ __forceinline__ float activate(float x, uint32_t act) {
  if (act == 0) return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  if (act == 1) return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
  return fmaxf(x, 0.0f);
}

// out = act(y + bias) over (rows, width), in 16-byte packs with 32-bit indices where the layout
// allows (see Pack), else per element.
template <typename T>
__device__ void bias_act(const T* __restrict__ y, const T* __restrict__ bias, T* __restrict__ out, uint64_t rows, uint64_t width,
                         uint32_t act) {
  constexpr int V = Pack<T>::N;
  if (width % V == 0 && aligned16(y) && aligned16(bias) && aligned16(out) && rows * (width / V) < (1ull << 31)) {
    const uint32_t per_row = width / V;
    grid_stride((uint32_t)(rows * per_row), [&](uint32_t i) {
      const uint64_t c = (uint64_t)(i % per_row) * V;
      const Pack<T> a = load_pack(y + (uint64_t)i * V), b = load_pack(bias + c);
      Pack<T> r;
#pragma unroll
      for (int e = 0; e < V; e++) r.set(e, activate(a.get(e) + b.get(e), act));
      store_pack(out + (uint64_t)i * V, r);
    });
    return;
  }
  grid_stride(rows * width, [&](uint64_t i) { out[i] = from_float<T>(activate(to_float(y[i]) + to_float(bias[i % width]), act)); });
}

// One L2-normalised f32 vector per sequence: the mean (or, with lens of 1, the first row) of rows
// starts[s] .. starts[s] + lens[s] of x (rows, width). One block per sequence (blockDim.x a multiple
// of 32); each thread keeps the sums of its columns in registers, at most 4 columns a thread
// (width <= 4 * blockDim.x, checked by the caller).
template <typename T>
__device__ void pool_normalize(const T* __restrict__ x, const uint32_t* __restrict__ starts, const uint32_t* __restrict__ lens,
                               float* __restrict__ out, uint64_t width) {
  const uint64_t s = blockIdx.x;
  const uint64_t start = starts[s];
  const uint32_t len = lens[s];
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (uint32_t r = 0; r < len; ++r) {
    const T* row = x + (start + r) * width;
    for (int c = 0; c < 4; ++c) {
      const uint64_t j = threadIdx.x + (uint64_t)c * blockDim.x;
      if (j < width) acc[c] += to_float(row[j]);
    }
  }
  const float scale = len > 0 ? 1.0f / (float)len : 0.0f;
  float sq = 0.0f;
  for (int c = 0; c < 4; ++c) {
    acc[c] *= scale;
    if (threadIdx.x + (uint64_t)c * blockDim.x < width) sq += acc[c] * acc[c];
  }
  __shared__ float partial[32];
  sq = warp_sum(sq);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = sq;
  __syncthreads();
  float total = 0.0f;
  for (unsigned w = 0; w < blockDim.x / 32; ++w) total += partial[w];
  const float inv = 1.0f / fmaxf(sqrtf(total), 1e-12f);
  for (int c = 0; c < 4; ++c) {
    const uint64_t j = threadIdx.x + (uint64_t)c * blockDim.x;
    if (j < width) out[s * width + j] = acc[c] * inv;
  }
}

#define ENCODER_KERNELS(T, SUFFIX)                                                                                             \
  extern "C" __global__ void bias_residual_layer_norm_##SUFFIX(const T* y, const T* bias, const T* residual, const T* gamma,  \
                                                                const T* beta, T* out, uint64_t rows, uint64_t width,         \
                                                                float eps) {                                                  \
    bias_residual_layer_norm(y, bias, residual, gamma, beta, out, rows, width, eps);                                          \
  }                                                                                                                           \
  extern "C" __global__ void bias_act_##SUFFIX(const T* y, const T* bias, T* out, uint64_t rows, uint64_t width, uint32_t act) { \
    bias_act(y, bias, out, rows, width, act);                                                                                 \
  }                                                                                                                           \
  extern "C" __global__ void pool_normalize_##SUFFIX(const T* x, const uint32_t* starts, const uint32_t* lens, float* out,    \
                                                      uint64_t width) {                                                       \
    pool_normalize(x, starts, lens, out, width);                                                                              \
  }

ENCODER_KERNELS(__half, f16)
ENCODER_KERNELS(__nv_bfloat16, bf16)
ENCODER_KERNELS(float, f32)
