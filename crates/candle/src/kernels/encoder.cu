// The BERT encoder's element-wise steps on CUDA, each fused into one pass over memory: a layer runs
// its four matmuls (cuBLAS, through candle), FlashAttention-2, the q/k/v split with its bias (split_qkv
// in fused.cu, shared with the decoder) and three of these kernels, where
// candle's ops take a bias add, three q/k/v copies, two residual adds, two layer norms, a bias add
// and a GELU. Compiled to PTX by crates/candle/build.rs with the `cuda` feature; launched by
// src/encoder_kernels.rs. Math in f32, one rounding to the storage type at the end.

#include "common.cuh"

// o = layer_norm(a + b + c) over one row of `width` by the 32 lanes of a warp: `a` and `c` are this
// row's, `b` one vector for every row (a bias, the token-type row). In 16-byte packs where every
// pointer allows (see Pack), else element by element; the row's values stay in the warp's L1 between
// the mean, variance and write passes. Shared by the layers' norms and the embeddings' norm.
template <typename T>
__device__ void sum3_layer_norm_row(const T* __restrict__ a, const T* __restrict__ b, const T* __restrict__ c,
                                    const T* __restrict__ gamma, const T* __restrict__ beta, T* __restrict__ o, uint64_t width,
                                    float eps, unsigned lane) {
  constexpr int V = Pack<T>::N;
  if (width % V == 0 && aligned16(a) && aligned16(b) && aligned16(c) && aligned16(gamma) && aligned16(beta) && aligned16(o)) {
    const uint32_t packs = width / V;
    auto summed = [&](uint32_t p, float* v) {
      const Pack<T> x = load_pack(a + p * V), y = load_pack(b + p * V), z = load_pack(c + p * V);
#pragma unroll
      for (int e = 0; e < V; e++) v[e] = x.get(e) + y.get(e) + z.get(e);
    };
    float v[V];
    float sum = 0.0f;
    for (uint32_t p = lane; p < packs; p += 32) {
      summed(p, v);
#pragma unroll
      for (int e = 0; e < V; e++) sum += v[e];
    }
    const float mean = warp_sum(sum) / (float)width;
    float sq = 0.0f;
    for (uint32_t p = lane; p < packs; p += 32) {
      summed(p, v);
#pragma unroll
      for (int e = 0; e < V; e++) sq += (v[e] - mean) * (v[e] - mean);
    }
    const float inv = rsqrtf(warp_sum(sq) / (float)width + eps);
    for (uint32_t p = lane; p < packs; p += 32) {
      summed(p, v);
      const Pack<T> g = load_pack(gamma + p * V), be = load_pack(beta + p * V);
      Pack<T> r;
#pragma unroll
      for (int e = 0; e < V; e++) r.set(e, (v[e] - mean) * inv * g.get(e) + be.get(e));
      store_pack(o + p * V, r);
    }
    return;
  }
  float sum = 0.0f;
  for (uint64_t j = lane; j < width; j += 32) sum += to_float(a[j]) + to_float(b[j]) + to_float(c[j]);
  const float mean = warp_sum(sum) / (float)width;
  float sq = 0.0f;
  for (uint64_t j = lane; j < width; j += 32) {
    const float d = to_float(a[j]) + to_float(b[j]) + to_float(c[j]) - mean;
    sq += d * d;
  }
  const float inv = rsqrtf(warp_sum(sq) / (float)width + eps);
  for (uint64_t j = lane; j < width; j += 32) {
    const float v = to_float(a[j]) + to_float(b[j]) + to_float(c[j]);
    o[j] = from_float<T>((v - mean) * inv * to_float(gamma[j]) + to_float(beta[j]));
  }
}

// out = layer_norm(y + bias + residual) over rows of `width`.
template <typename T>
__device__ void bias_residual_layer_norm(const T* __restrict__ y, const T* __restrict__ bias, const T* __restrict__ residual,
                                         const T* __restrict__ gamma, const T* __restrict__ beta, T* __restrict__ out, uint64_t rows,
                                         uint64_t width, float eps) {
  uint64_t row;
  unsigned lane;
  if (!warp_row(rows, &row, &lane)) return;
  sum3_layer_norm_row(y + row * width, bias, residual + row * width, gamma, beta, out + row * width, width, eps, lane);
}

// BERT's embeddings: out = layer_norm(word[ids[r]] + position[positions[r]] + token_type) for every
// row r, where candle's ops take two gathers, two adds and a layer norm. An id or position past its
// table (the host checks them first) gives a row of zeros, never a read outside the tables.
template <typename T>
__device__ void embed_layer_norm(const uint32_t* __restrict__ ids, const uint32_t* __restrict__ positions, const T* __restrict__ word,
                                 const T* __restrict__ position, const T* __restrict__ token_type, const T* __restrict__ gamma,
                                 const T* __restrict__ beta, T* __restrict__ out, uint64_t rows, uint64_t width, uint32_t vocab,
                                 uint32_t max_positions, float eps) {
  uint64_t row;
  unsigned lane;
  if (!warp_row(rows, &row, &lane)) return;
  const uint32_t id = ids[row], pos = positions[row];
  T* o = out + row * width;
  if (id >= vocab || pos >= max_positions) {
    for (uint64_t j = lane; j < width; j += 32) o[j] = from_float<T>(0.0f);
    return;
  }
  sum3_layer_norm_row(word + (uint64_t)id * width, token_type, position + (uint64_t)pos * width, gamma, beta, o, width, eps, lane);
}

// The activation: 0 = GELU (erf), 1 = GELU (tanh), 2 = ReLU, 3 = none.
__device__ __forceinline__ float activate(float x, uint32_t act) {
  if (act == 0) return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  if (act == 1) return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
  if (act == 3) return x;
  return fmaxf(x, 0.0f);
}

// out (rows, width, contiguous) = act(y + bias), where y's rows lie `y_stride` elements apart (the
// first `width` columns of a wider matrix, or all of a contiguous one). In 16-byte packs with 32-bit
// indices where the layout allows (see Pack), else per element.
template <typename T>
__device__ void bias_act(const T* __restrict__ y, const T* __restrict__ bias, T* __restrict__ out, uint64_t rows, uint64_t width,
                         uint64_t y_stride, uint32_t act) {
  constexpr int V = Pack<T>::N;
  if (width % V == 0 && y_stride % V == 0 && aligned16(y) && aligned16(bias) && aligned16(out) && rows * (width / V) < (1ull << 31)) {
    const uint32_t per_row = width / V;
    grid_stride((uint32_t)(rows * per_row), [&](uint32_t i) {
      const uint64_t row = i / per_row, c = (uint64_t)(i % per_row) * V;
      const Pack<T> a = load_pack(y + row * y_stride + c), b = load_pack(bias + c);
      Pack<T> r;
#pragma unroll
      for (int e = 0; e < V; e++) r.set(e, activate(a.get(e) + b.get(e), act));
      store_pack(out + (uint64_t)i * V, r);
    });
    return;
  }
  grid_stride(rows * width, [&](uint64_t i) {
    const uint64_t row = i / width, c = i % width;
    out[i] = from_float<T>(activate(to_float(y[row * y_stride + c]) + to_float(bias[c]), act));
  });
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
  extern "C" __global__ void embed_layer_norm_##SUFFIX(const uint32_t* ids, const uint32_t* positions, const T* word,          \
                                                        const T* position, const T* token_type, const T* gamma, const T* beta, \
                                                        T* out, uint64_t rows, uint64_t width, uint32_t vocab,                 \
                                                        uint32_t max_positions, float eps) {                                   \
    embed_layer_norm(ids, positions, word, position, token_type, gamma, beta, out, rows, width, vocab, max_positions, eps);   \
  }                                                                                                                           \
  extern "C" __global__ void bias_act_##SUFFIX(const T* y, const T* bias, T* out, uint64_t rows, uint64_t width,             \
                                                uint64_t y_stride, uint32_t act) {                                            \
    bias_act(y, bias, out, rows, width, y_stride, act);                                                                       \
  }                                                                                                                           \
  extern "C" __global__ void pool_normalize_##SUFFIX(const T* x, const uint32_t* starts, const uint32_t* lens, float* out,    \
                                                      uint64_t width) {                                                       \
    pool_normalize(x, starts, lens, out, width);                                                                              \
  }

ENCODER_KERNELS(__half, f16)
ENCODER_KERNELS(__nv_bfloat16, bf16)
ENCODER_KERNELS(float, f32)
