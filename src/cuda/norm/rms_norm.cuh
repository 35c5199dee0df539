// src/cuda/norm/rms_norm.cuh: RMSNorm, one warp per row (SPEC 3).
//   y = w * cast_x(x * rsqrt(mean(x^2) + eps))
// x: rows with a byte stride, last dim D contiguous; T_IN/T_W/T_OUT are the storage types.
#pragma once

#include "cuda/rows.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace kimi::cuda {

template <class T> __device__ __forceinline__ float to_f32(T v) { return float(v); }
template <> __device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> __device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }
template <class T> __device__ __forceinline__ T from_f32(float v) { return T(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half from_f32(float v) { return __float2half_rn(v); }

template <class TIn, class TW, class TOut>
__global__ void rms_norm_kernel(const TIn* __restrict__ x, RowMap x_row_off,
                                const TW* __restrict__ w, TOut* __restrict__ y,
                                RowMap y_row_off, int64_t rows, int d, float eps) {
  const int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const TIn* xr = x + x_row_off[row];
  TOut* yr = y + y_row_off[row];
  float ss = 0.f;
  for (int i = lane; i < d; i += 32) {
    const float v = to_f32(xr[i]);
    ss += v * v;
  }
#pragma unroll
  for (int o = 16; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const float s = rsqrtf(ss / float(d) + eps);
  for (int i = lane; i < d; i += 32) {
    const float n = to_f32(from_f32<TIn>(to_f32(xr[i]) * s));  // NOTE: round to x's dtype first (HF)
    yr[i] = from_f32<TOut>(to_f32(w[i]) * n);
  }
}

}  // namespace kimi::cuda
