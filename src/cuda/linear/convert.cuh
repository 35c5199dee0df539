// src/cuda/linear/convert.cuh: the elementwise helpers of the projection launchers, on 2-D row-strided views
// (rows r < rows, columns c < cols; element (r, c) at r * ld + c; dtypes as codes of src/cuda/elementwise.cuh).
//   convert_kernel:  dst = round_dst(src + (beta != 0 ? dst : 0))  (dtype change / repacking; beta 0 or 1)
//   split_kernel:    src (f32 or f16) = sum_p parts[p], parts bf16 [P, rows, cols] contiguous:
//                    part 0 = bf16(v), part p = bf16(v - sum_{q<p} part q) -- P = 3 holds every f32 exactly
//                    (3 x 8 significant bits; only remainders below bf16's range 2^-133 are lost), P = 2 every f16.
//   finish_kernel:   y = round_y(acc + (beta != 0 ? y : 0)), acc f32 [rows, cols] contiguous (absent: 0).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "cuda/elementwise.cuh"
#include "cuda/pdl.cuh"

namespace kimi::cuda {

__global__ void convert_kernel(const void* __restrict__ src, int ts, int64_t lds, void* __restrict__ dst, int td,
                               int64_t ldd, int64_t rows, int64_t cols, float beta) {
  pdl_launch_dependents();  // pdl.cuh: launched with programmatic_launch
  pdl_wait();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  const int64_t r = i / cols, c = i % cols;
  const float v = load_f32(src, r * lds + c, ts);
  store_f32(dst, r * ldd + c, td, beta != 0.f ? load_f32(dst, r * ldd + c, td) + v : v);
}

__global__ void split_kernel(const void* __restrict__ src, int ts, int64_t lds, __nv_bfloat16* __restrict__ parts,
                             int p_count, int64_t rows, int64_t cols) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  const int64_t r = i / cols, c = i % cols;
  float v = load_f32(src, r * lds + c, ts);
  for (int p = 0; p < p_count; ++p) {
    const __nv_bfloat16 h = __float2bfloat16_rn(v);
    parts[p * rows * cols + i] = h;
    v -= __bfloat162float(h);  // exact: the remainder of a round-to-nearest fits in f32
  }
}

__global__ void finish_kernel(const float* __restrict__ acc, void* __restrict__ y, int ty, int64_t ldy, float beta,
                              int64_t rows, int64_t cols) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  const int64_t r = i / cols, c = i % cols;
  const float a = acc ? acc[i] : 0.f;
  store_f32(y, r * ldy + c, ty, beta != 0.f ? load_f32(y, r * ldy + c, ty) + a : a);
}

}  // namespace kimi::cuda
