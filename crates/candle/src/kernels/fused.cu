// warpfold's own CUDA kernels: two operations that candle composes from several kernels (and, for
// strided inputs, slow index arithmetic), each done here in one pass over memory. Compiled to PTX by
// crates/candle/build.rs with the `cuda` feature; loaded and launched by src/fused.rs.
//
// Indices are 64-bit: a bin of a large model has activations of more than 2^32 elements.

#include "common.cuh"

// SwiGLU on the fused gate-up projection: `gate_up` is (rows, 2 * inter), gate in the first half of
// each row and up in the second; out (rows, inter) = silu(gate) * up, computed in f32, rounded once.
// In packs of 16 bytes with 32-bit indices where the layout allows (see Pack), else per element.
template <typename T>
__device__ void silu_mul(const T* __restrict__ gate_up, T* __restrict__ out, uint64_t rows, uint64_t inter) {
  constexpr int V = Pack<T>::N;
  if (inter % V == 0 && aligned16(gate_up) && aligned16(out) && rows * (inter / V) < (1ull << 31)) {
    const uint32_t per_row = inter / V;
    const uint32_t n = rows * per_row;
    grid_stride(n, [&](uint32_t i) {
      const uint32_t r = i / per_row;
      const uint64_t c = (uint64_t)(i - r * per_row) * V;
      const T* row = gate_up + (uint64_t)r * 2 * inter;
      const Pack<T> g = load_pack(row + c), u = load_pack(row + inter + c);
      Pack<T> o;
#pragma unroll
      for (int e = 0; e < V; e++) {
        const float x = g.get(e);
        o.set(e, x / (1.0f + __expf(-x)) * u.get(e));
      }
      store_pack(out + (uint64_t)r * inter + c, o);
    });
    return;
  }
  const uint64_t n = rows * inter;
  grid_stride(n, [&](uint64_t i) {
    const uint64_t r = i / inter;
    const uint64_t j = i - r * inter;
    const T* row = gate_up + r * 2 * inter;
    const float g = to_float(row[j]);
    const float u = to_float(row[inter + j]);
    out[i] = from_float<T>(g / (1.0f + __expf(-g)) * u);
  });
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
  grid_stride(total, [&](uint64_t i) {
    const uint64_t r = i / width;
    const uint64_t row = rows[r];
    if (row < dst_rows) {
      dst[row * width + (i - r * width)] = src[i];
    }
  });
}

extern "C" __global__ void scatter_rows_u16(const uint32_t* rows, const uint16_t* src, uint16_t* dst, uint64_t n, uint64_t width,
                                            uint64_t dst_rows) {
  scatter_rows(rows, src, dst, n, width, dst_rows);
}
extern "C" __global__ void scatter_rows_u32(const uint32_t* rows, const uint32_t* src, uint32_t* dst, uint64_t n, uint64_t width,
                                            uint64_t dst_rows) {
  scatter_rows(rows, src, dst, n, width, dst_rows);
}

// The attention's inputs from a fused q/k/v projection, in one pass (the decoder's and the encoder's):
// `qkv` is (rows, (heads + 2·kv_heads)·hd), q's heads first, then k's, then v's, straight from the
// matmul; `bias` the (heads + 2·kv_heads)·hd bias to add, or null. With rotary angles (`cos`, `sin`:
// (rows, hd/2)) q and k are turned by each row's angles; with null angles nothing is turned. q
// (rows, heads, hd), k and v (rows, kv_heads, hd) are written contiguous, which is what the varlen
// attention reads. Candle needs a bias pass (a broadcast kernel), a copy each for q and k (its rope
// wants contiguous input), two rope passes and a copy of v for the same. `interleaved`: dimension 2i
// pairs with 2i+1 (llama.cpp's GGUFs), else i with i + hd/2 (Hugging Face). In f32, rounded once.
// Without interleaving and with whole packs in half a head, one thread turns a pack of pairs (two
// 16-byte loads of the head, one each of bias, cos and sin); otherwise one thread per pair.
template <typename T>
__device__ void split_qkv(const T* __restrict__ qkv, const T* __restrict__ bias, const T* __restrict__ cos, const T* __restrict__ sin,
                          T* __restrict__ q, T* __restrict__ k, T* __restrict__ v, uint64_t rows, uint64_t heads, uint64_t kv_heads,
                          uint64_t hd, int interleaved) {
  const uint64_t half = hd / 2;
  const uint64_t all_heads = heads + 2 * kv_heads;
  const uint64_t pairs_per_row = all_heads * half;
  constexpr int V = Pack<T>::N;
  if (!interleaved && half % V == 0 && rows * (pairs_per_row / V) < (1ull << 31) && aligned16(qkv) && aligned16(bias) &&
      aligned16(cos) && aligned16(sin) && aligned16(q) && aligned16(k) && aligned16(v)) {
    const uint32_t per_head = half / V;
    const uint32_t per_row = all_heads * per_head;
    const uint32_t n = rows * per_row;
    grid_stride(n, [&](uint32_t i) {
      const uint32_t r = i / per_row;
      const uint32_t p = i - r * per_row;
      const uint32_t head = p / per_head;
      const uint64_t a = (uint64_t)(p - head * per_head) * V;  // the pack's first pair: a..a+V with a+half..
      const uint64_t col = (uint64_t)head * hd;
      const T* src = qkv + (uint64_t)r * all_heads * hd + col;
      const Pack<T> x1 = load_pack(src + a), x2 = load_pack(src + a + half);
      float lo[V], hi[V];
#pragma unroll
      for (int e = 0; e < V; e++) lo[e] = x1.get(e), hi[e] = x2.get(e);
      if (bias != nullptr) {
        const Pack<T> b1 = load_pack(bias + col + a), b2 = load_pack(bias + col + a + half);
#pragma unroll
        for (int e = 0; e < V; e++) lo[e] += b1.get(e), hi[e] += b2.get(e);
      }
      T* dst;
      bool turn = cos != nullptr;
      if (head < heads) {
        dst = q + ((uint64_t)r * heads + head) * hd;
      } else if (head < heads + kv_heads) {
        dst = k + ((uint64_t)r * kv_heads + (head - heads)) * hd;
      } else {
        dst = v + ((uint64_t)r * kv_heads + (head - heads - kv_heads)) * hd;
        turn = false;
      }
      if (turn) {
        const Pack<T> c = load_pack(cos + (uint64_t)r * half + a), s = load_pack(sin + (uint64_t)r * half + a);
#pragma unroll
        for (int e = 0; e < V; e++) {
          const float y1 = lo[e] * c.get(e) - hi[e] * s.get(e);
          hi[e] = hi[e] * c.get(e) + lo[e] * s.get(e);
          lo[e] = y1;
        }
      }
      Pack<T> o1, o2;
#pragma unroll
      for (int e = 0; e < V; e++) o1.set(e, lo[e]), o2.set(e, hi[e]);
      store_pack(dst + a, o1);
      store_pack(dst + a + half, o2);
    });
    return;
  }
  const uint64_t n = rows * pairs_per_row;
  grid_stride(n, [&](uint64_t i) {
    const uint64_t r = i / pairs_per_row;
    const uint64_t p = i - r * pairs_per_row;
    const uint64_t head = p / half;
    const uint64_t j = p - head * half;
    // The pair's two elements inside the head.
    const uint64_t a = interleaved ? 2 * j : j;
    const uint64_t b = interleaved ? 2 * j + 1 : j + half;
    const uint64_t col = head * hd;
    const T* src = qkv + r * all_heads * hd + col;
    float x1 = to_float(src[a]);
    float x2 = to_float(src[b]);
    if (bias != nullptr) {
      x1 += to_float(bias[col + a]);
      x2 += to_float(bias[col + b]);
    }
    T* dst;
    bool turn = cos != nullptr;
    if (head < heads) {
      dst = q + (r * heads + head) * hd;
    } else if (head < heads + kv_heads) {
      dst = k + (r * kv_heads + (head - heads)) * hd;
    } else {
      dst = v + (r * kv_heads + (head - heads - kv_heads)) * hd;
      turn = false;
    }
    if (turn) {
      const float c = to_float(cos[r * half + j]);
      const float s = to_float(sin[r * half + j]);
      const float y1 = x1 * c - x2 * s;
      x2 = x2 * c + x1 * s;
      x1 = y1;
    }
    dst[a] = from_float<T>(x1);
    dst[b] = from_float<T>(x2);
  });
}

#define SPLIT_QKV(NAME, T)                                                                                                         \
  extern "C" __global__ void NAME(const T* qkv, const T* bias, const T* cos, const T* sin, T* q, T* k, T* v, uint64_t rows,       \
                                  uint64_t heads, uint64_t kv_heads, uint64_t hd, int interleaved) {                              \
    split_qkv(qkv, bias, cos, sin, q, k, v, rows, heads, kv_heads, hd, interleaved);                                              \
  }
SPLIT_QKV(split_qkv_bf16, __nv_bfloat16)
SPLIT_QKV(split_qkv_f16, __half)
SPLIT_QKV(split_qkv_f32, float)

// The residual stream's add fused into the norm that reads it: sum = x + y (rounded to the storage
// type: that is the stream), out = rms_norm(sum) · weight, one warp per row (blocks of 8 warps).
// Candle takes an add (read two, write one) and then its rms-norm kernel (read one, write one).
template <typename T>
__device__ void residual_rms_norm(const T* __restrict__ x, const T* __restrict__ y, const T* __restrict__ weight, T* __restrict__ sum,
                                  T* __restrict__ out, uint64_t rows, uint64_t width, float eps) {
  uint64_t row;
  unsigned lane;
  if (!warp_row(rows, &row, &lane)) return;
  const T* xr = x + row * width;
  const T* yr = y + row * width;
  T* sr = sum + row * width;
  T* o = out + row * width;
  float sq = 0.0f;
  constexpr int V = Pack<T>::N;
  if (width % V == 0 && aligned16(x) && aligned16(y) && aligned16(weight) && aligned16(sum) && aligned16(out)) {
    // Whole rows are whole packs, so every row starts aligned too. Each lane reads back only the
    // packs it wrote itself.
    const uint64_t packs = width / V;
    for (uint64_t c = lane; c < packs; c += 32) {
      const Pack<T> a = load_pack(xr + c * V), b = load_pack(yr + c * V);
      Pack<T> s;
#pragma unroll
      for (int e = 0; e < V; e++) {
        s.set(e, a.get(e) + b.get(e));
        const float v = s.get(e);
        sq += v * v;
      }
      store_pack(sr + c * V, s);
    }
    const float inv = rsqrtf(warp_sum(sq) / (float)width + eps);
    for (uint64_t c = lane; c < packs; c += 32) {
      const Pack<T> s = load_pack(sr + c * V), w = load_pack(weight + c * V);
      Pack<T> r;
#pragma unroll
      for (int e = 0; e < V; e++) r.set(e, s.get(e) * inv * w.get(e));
      store_pack(o + c * V, r);
    }
    return;
  }
  for (uint64_t j = lane; j < width; j += 32) {
    const T s = from_float<T>(to_float(xr[j]) + to_float(yr[j]));
    sr[j] = s;
    const float v = to_float(s);
    sq += v * v;
  }
  const float inv = rsqrtf(warp_sum(sq) / (float)width + eps);
  // Each lane reads back only what it wrote itself.
  for (uint64_t j = lane; j < width; j += 32) o[j] = from_float<T>(to_float(sr[j]) * inv * to_float(weight[j]));
}

#define RESIDUAL_RMS_NORM(NAME, T)                                                                                                 \
  extern "C" __global__ void NAME(const T* x, const T* y, const T* weight, T* sum, T* out, uint64_t rows, uint64_t width,         \
                                  float eps) {                                                                                    \
    residual_rms_norm(x, y, weight, sum, out, rows, width, eps);                                                                  \
  }
RESIDUAL_RMS_NORM(residual_rms_norm_bf16, __nv_bfloat16)
RESIDUAL_RMS_NORM(residual_rms_norm_f16, __half)
RESIDUAL_RMS_NORM(residual_rms_norm_f32, float)
