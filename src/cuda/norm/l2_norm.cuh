// src/cuda/norm/l2_norm.cuh: L2 norm (SPEC 3, KDA q/k), one warp per row:
//   y = x / sqrt(sum(x^2) + eps)        (sum, not mean; fp32)
// x, y: rows at element offsets (any leading strides), D contiguous; dtypes as codes.
#pragma once

#include "cuda/rows.cuh"

#include "cuda/elementwise.cuh"

namespace kimi::cuda {

__global__ void l2_norm_kernel(const void* x, int tx, RowMap x_off, void* y, int ty, RowMap y_off,
                               int64_t rows, int d, float eps) {
  const int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  float ss = 0.f;
  for (int i = lane; i < d; i += 32) {
    const float v = load_f32(x, x_off[row] + i, tx);
    ss += v * v;
  }
#pragma unroll
  for (int m = 16; m > 0; m /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, m);
  const float s = 1.f / sqrtf(ss + eps);  // NOTE: not rsqrtf (approximate, ~2 ulp)
  for (int i = lane; i < d; i += 32) store_f32(y, y_off[row] + i, ty, load_f32(x, x_off[row] + i, tx) * s);
}

}  // namespace kimi::cuda
