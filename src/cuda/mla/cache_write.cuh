// src/cuda/mla/cache_write.cuh: mla_cache_write, one CTA per written row (kimi/ops/mla.h):
//   cache[slots[n], start[n] + t, :] = [latent[n, t, :R] | k_pe[n, t, :P]]       converted to the cache dtype
// latent [N, T, R], k_pe [N, T, P], cache [Nc, L, R+P]: strides in elements, last dims contiguous.
// dst[n] = slots[n] * cache.stride(0) + start[n] * cache.stride(1), built on the host.
#pragma once

#include "cuda/elementwise.cuh"

namespace kimi::cuda::mla {

__global__ void cache_write_kernel(const void* lat, int tl, int64_t l_s0, int64_t l_s1, const void* pe, int tp,
                                   int64_t p_s0, int64_t p_s1, void* cache, int tc, int64_t c_s1,
                                   const int64_t* __restrict__ dst, int64_t T, int R, int P) {
  const int64_t row = blockIdx.x, n = row / T, t = row % T;
  const int64_t d = dst[n] + t * c_s1;
  for (int e = threadIdx.x; e < R + P; e += blockDim.x) {
    const float v = e < R ? load_f32(lat, n * l_s0 + t * l_s1 + e, tl) : load_f32(pe, n * p_s0 + t * p_s1 + (e - R), tp);
    store_f32(cache, d + e, tc, v);
  }
}

}  // namespace kimi::cuda::mla
