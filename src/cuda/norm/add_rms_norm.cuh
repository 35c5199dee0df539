// src/cuda/norm/add_rms_norm.cuh: fused residual add + RMSNorm (SPEC 3), one warp per row:
//   sum = cast_sum(x + residual);  y = w * cast_sum(sum * rsqrt(mean(sum^2) + eps))
// x, residual, sum, y: rows at element offsets (any leading strides), D contiguous; dtypes as codes.
// NOTE: sum may alias x or residual (exactly): lane i reads x[i], residual[i] and writes sum[i] itself, and the
//   second pass reads the rounded sum back from `sum` (x may be gone).
#pragma once

#include "cuda/rows.cuh"

#include "cuda/elementwise.cuh"

namespace kimi::cuda {

__global__ void add_rms_norm_kernel(const void* x, int tx, RowMap x_off, const void* r, int tr,
                                    RowMap r_off, const void* w, int tw, void* sum, int ts,
                                    RowMap s_off, void* y, int ty, RowMap y_off, int64_t rows, int d,
                                    float eps) {
  const int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  float ss = 0.f;
  for (int i = lane; i < d; i += 32) {
    const float v = round_to(load_f32(x, x_off[row] + i, tx) + load_f32(r, r_off[row] + i, tr), ts);
    store_f32(sum, s_off[row] + i, ts, v);
    ss += v * v;
  }
#pragma unroll
  for (int m = 16; m > 0; m /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, m);
  const float s = rsqrtf(ss / float(d) + eps);
  for (int i = lane; i < d; i += 32) {
    const float v = load_f32(sum, s_off[row] + i, ts);
    store_f32(y, y_off[row] + i, ty, load_f32(w, i, tw) * round_to(v * s, ts));
  }
}

}  // namespace kimi::cuda
