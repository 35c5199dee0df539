// src/cuda/moe/group.cuh: grouping the routed (token, slot) pairs by expert, and combining expert outputs.
// A slot is i = t * K + j (token t's j-th routed expert ids[i]); rows of the grouped buffers are ordered by
// expert (expert e owns rows [start_e, start_e + count_e)); within an expert the order is whatever the
// atomics gave (each row is computed independently, and the combine reads rows by slot, so the result
// does not depend on it).
//   count_kernel:   count[ids[i]] += 1
//   place_kernel:   row = cursor[ids[i]]++ (cursor starts at start); row_of_slot[i] = row
//   gather_kernel:  zg[row_of_slot[i], :] = z[i / K, :]                               zg f32 [T*K, D]
//   combine_kernel: y[t, c] = sum_j w[t*K + j] * ye[row_of_slot[t*K + j], c]  (j ascending, fp32)
#pragma once

#include <cstdint>

namespace kimi::cuda {

__global__ void count_kernel(const int32_t* __restrict__ ids, int64_t slots, int32_t* __restrict__ count) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < slots) atomicAdd(&count[ids[i]], 1);
}

__global__ void place_kernel(const int32_t* __restrict__ ids, int64_t slots, int32_t* __restrict__ cursor,
                             int32_t* __restrict__ row_of_slot) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < slots) row_of_slot[i] = atomicAdd(&cursor[ids[i]], 1);
}

__global__ void gather_kernel(const float* __restrict__ z, const int32_t* __restrict__ row_of_slot, int k,
                              int64_t slots, int64_t d, float* __restrict__ zg) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= slots * d) return;
  const int64_t slot = i / d, c = i % d;
  zg[int64_t(row_of_slot[slot]) * d + c] = z[(slot / k) * d + c];
}

__global__ void combine_kernel(const float* __restrict__ ye, const int32_t* __restrict__ row_of_slot,
                               const float* __restrict__ w, int k, int64_t tokens, int64_t d, float* __restrict__ y) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= tokens * d) return;
  const int64_t t = i / d, c = i % d;
  float acc = 0.f;
  for (int j = 0; j < k; ++j) acc += w[t * k + j] * ye[int64_t(row_of_slot[t * k + j]) * d + c];
  y[i] = acc;
}

// 4-byte elements [rows, cols] contiguous -> rows ld apart (the optional ids / weights outputs).
__global__ void copy_rows_kernel(const uint32_t* __restrict__ src, int64_t rows, int64_t cols, uint32_t* __restrict__ dst,
                                 int64_t ld) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < rows * cols) dst[(i / cols) * ld + i % cols] = src[i];
}

}  // namespace kimi::cuda
