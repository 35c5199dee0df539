// src/cuda/mla/cache_write.cuh: mla_cache_write, one CTA per written row (kimi/ops/mla.h):
//   cache[slots[n], start[n] + t, :] = [latent[n, t, :R] | k_pe[n, t, :P]]       converted to the cache dtype
// latent [N, T, R], k_pe [N, T, P], cache [Nc, L, R+P]: strides in elements, last dims contiguous.
// dst[n] = slots[n] * cache.stride(0) + start[n] * cache.stride(1): built on the host from checked values, or on the
// device (cache_dst_kernel) from the device form of start / slots, -1 where they fall outside the cache (the
// sequence's rows are then not written).
#pragma once

#include "cuda/elementwise.cuh"
#include "cuda/index.cuh"

namespace kimi::cuda::mla {

__global__ void cache_write_kernel(const void* lat, int tl, int64_t l_s0, int64_t l_s1, const void* pe, int tp,
                                   int64_t p_s0, int64_t p_s1, void* cache, int tc, int64_t c_s1,
                                   const int64_t* __restrict__ dst, int64_t T, int R, int P) {
  const int64_t row = blockIdx.x, n = row / T, t = row % T;
  if (dst[n] < 0) return;
  const int64_t d = dst[n] + t * c_s1;
  for (int e = threadIdx.x; e < R + P; e += blockDim.x) {
    const float v = e < R ? load_f32(lat, n * l_s0 + t * l_s1 + e, tl) : load_f32(pe, n * p_s0 + t * p_s1 + (e - R), tp);
    store_f32(cache, d + e, tc, v);
  }
}

__global__ void cache_dst_kernel(DevIndex start, DevIndex slots, int64_t N, int64_t T, int64_t Nc, int64_t L,
                                 int64_t c_s0, int64_t c_s1, int64_t* dst) {
  const int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (n >= N) return;
  const int64_t st = start[n], sl = slots[n];
  dst[n] = st >= 0 && st <= L - T && sl >= 0 && sl < Nc ? sl * c_s0 + st * c_s1 : -1;
}

}  // namespace kimi::cuda::mla
