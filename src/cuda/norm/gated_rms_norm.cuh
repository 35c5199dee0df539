// src/cuda/norm/gated_rms_norm.cuh: per-head gated RMSNorm (SPEC 3, KDA output), one warp per row
// (a row = one head of one token):
//   y = w * (o * rsqrt(mean(o^2) + eps)) * sigmoid(z)      fp32 throughout (no rounding before w)
// o, z, y: rows at element offsets (any leading strides), D contiguous; dtypes as codes; z optional.
#pragma once

#include "cuda/rows.cuh"

#include "cuda/elementwise.cuh"
#include "cuda/norm/gated_rms.cuh"

namespace kimi::cuda {

__global__ void gated_rms_norm_kernel(const void* o, int to, RowMap o_off, const void* z, int tz,
                                      RowMap z_off, const void* w, int tw, void* y, int ty,
                                      RowMap y_off, int64_t rows, int d, float eps) {
  const int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  float ss = 0.f;
  for (int i = lane; i < d; i += 32) {
    const float v = load_f32(o, o_off[row] + i, to);
    ss += v * v;
  }
#pragma unroll
  for (int m = 16; m > 0; m /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, m);
  const float r = gated_rms_scale(ss, d, eps);
  for (int i = lane; i < d; i += 32) {
    const float zi = z != nullptr ? load_f32(z, z_off[row] + i, tz) : 0.f;
    store_f32(y, y_off[row] + i, ty, gated_rms_out(load_f32(o, o_off[row] + i, to), r, load_f32(w, i, tw), z != nullptr, zi));
  }
}

}  // namespace kimi::cuda
