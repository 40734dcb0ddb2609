// What warpfold's kernels share: conversions between the storage types and f32, in which they compute.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(float x) { return x; }

template <typename T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16(x); }
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half(x); }
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }

// f(i) for every i below n, the grid's threads striding over them (I: uint32_t where n allows, whose
// division is much cheaper than uint64_t's).
template <typename I, typename F> __device__ __forceinline__ void grid_stride(I n, F f) {
  const I stride = (I)blockDim.x * gridDim.x;
  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) f(i);
}

// The row this warp works on (the row kernels: one warp per row, blocks of whole warps) and its lane;
// false past the last row.
__device__ __forceinline__ bool warp_row(uint64_t rows, uint64_t* row, unsigned* lane) {
  *row = (uint64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  *lane = threadIdx.x % 32;
  return *row < rows;
}

// The sum of `v` over the 32 lanes of a warp, in every lane.
__device__ __forceinline__ float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// 16 bytes, what one load instruction moves: 8 bf16 or f16 values, or 4 f32. The memory-bound kernels
// read and write in packs when every pointer is 16-byte aligned and every row a whole number of packs
// (the 7B's widths are), and element by element otherwise: per element they spent more instructions on
// 64-bit index division than on the arithmetic, and ran at under half the GPU's memory bandwidth.
template <typename T> struct Pack {
  static constexpr int N = 16 / sizeof(T);
  uint4 raw;
  __device__ __forceinline__ float get(int e) const { return to_float(reinterpret_cast<const T*>(&raw)[e]); }
  __device__ __forceinline__ void set(int e, float v) { reinterpret_cast<T*>(&raw)[e] = from_float<T>(v); }
};
template <typename T> __device__ __forceinline__ Pack<T> load_pack(const T* p) {
  Pack<T> k;
  k.raw = *reinterpret_cast<const uint4*>(p);
  return k;
}
template <typename T> __device__ __forceinline__ void store_pack(T* p, const Pack<T>& k) { *reinterpret_cast<uint4*>(p) = k.raw; }
// True for a null pointer too (an absent optional input does not stop the packed path).
__device__ __forceinline__ bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }
