// src/cuda/norm/row_vec.cuh: the vectorized launch of the row-wise streaming kernels (norms, KDA gate / beta):
// a group of `lanes` threads per row of D elements, each thread owning up to kRowChunks chunks of 8 elements
// (chunk q of the row = elements 8q .. 8q+7, thread `lane` owns chunks lane, lane + lanes, ...), read with one
// 16-byte access per chunk (cuda/elementwise_vec.cuh) and kept in registers between the row statistic and the
// output, so every input is read from memory once and every output written once.
//
// Geometry: lanes = the power of two >= ceil(D/8 / kRowChunks) (at most kRowMaxLanes), so each thread has a few
// 16-byte loads in flight; rows per block = 256 / lanes up to 32 lanes, one row per block past 32 lanes (the
// group then spans warps, summed through shared memory). With few rows (decode shapes) lanes doubles
// while the grid has fewer than kRowMinBlocks blocks and a thread more than one chunk: the row's loads spread over
// more threads, one round trip each. The row statistic is summed in fp32: each
// thread over its chunks in order, then a butterfly over the group's lanes (shuffles within the warp; past 32
// lanes, one row per block, the warps' partial sums through shared memory in warp order): a fixed order, so a
// call is deterministic (graph replays are bit-identical to eager calls).
// Examples at 8192 rows: D = 128 -> 4 lanes, 64 rows per block; D = 2304 -> 128 lanes (2 or 3 chunks each);
// D = 4096 -> 128 lanes (4 chunks), one row per block. At 32 rows: D = 4096 -> 512 lanes (one chunk each), one row
// per block; D = 128 -> 16 lanes.
//
// A kernel takes this path when every view it touches is vec8_view (base 16-byte aligned, D and every leading
// stride multiples of 8 elements) and D <= kRowMaxLanes * kRowChunks * 8; otherwise the launcher runs its
// one-warp-per-row scalar kernel (cuda/rows.cuh), which has no alignment requirement.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "cuda/elementwise_vec.cuh"
#include "cuda/rows.cuh"
#include "kimi/error.h"
#include "kimi/tensor.h"

namespace kimi::cuda {

inline constexpr int kRowChunks = 4;      // 8-element chunks per thread (registers: 32 floats per input row)
inline constexpr int kRowMaxLanes = 512;  // threads per row at most (D <= 16384): the kernels' launch bound
inline constexpr int kRowBlock = 256;     // threads per block when a row takes fewer
inline constexpr int64_t kRowMinBlocks = 256;  // the grid below which rows spread over more lanes (2 per H200 SM)

inline bool vec8_view(const TensorView& t) {
  if (!t.present()) return true;
  if (!vec8_aligned(t.data) || !vec8_step(t.shape[t.ndim - 1])) return false;
  for (int d = 0; d + 1 < t.ndim; ++d)
    if (!vec8_step(t.strides[d])) return false;
  return true;
}

// The row map of a [..., D] view with its leading dimensions merged where the layout allows (size-1 dimensions
// dropped; d merged into d+1 when stride[d] == stride[d+1] * size[d+1]): the same offsets for every row, fewer
// divisions per row (none for a contiguous [T, H, D] view).
inline RowMap vec_row_map(const TensorView& t) {
  RowMap m;
  if (!t.present()) return m;
  for (int d = 0; d + 1 < t.ndim; ++d) {
    if (t.shape[d] == 1) continue;
    if (m.nd > 0 && m.stride[m.nd - 1] == t.strides[d] * t.shape[d]) {
      m.size[m.nd - 1] *= t.shape[d];
      m.stride[m.nd - 1] = t.strides[d];
    } else {
      m.size[m.nd] = t.shape[d], m.stride[m.nd] = t.strides[d];
      ++m.nd;
    }
  }
  return m;
}

// Row r's element offset (r < the map's row count): RowMap::operator[] without the outermost modulo.
// NOTE: unrolled with guards, as RowMap::operator[] (no run-time index into the parameter: no stack frame).
__device__ __forceinline__ int64_t row_offset(const RowMap& m, int64_t r) {
  int64_t o = 0;
#pragma unroll
  for (int d = kMaxDims - 2; d > 0; --d) {
    if (d >= m.nd) continue;
    o += (r % m.size[d]) * m.stride[d];
    r /= m.size[d];
  }
  return m.nd > 0 ? o + r * m.stride[0] : 0;
}

struct VecRowLaunch {
  int64_t rows = 0;
  int lanes = 0;     // threads per row (a power of two)
  int threads = 0;   // per block
  unsigned blocks = 0;
  bool ok = false;   // D fits kRowMaxLanes * kRowChunks chunks
};

inline VecRowLaunch vec_row_launch(const char* op, int64_t rows, int64_t d) {
  VecRowLaunch l;
  l.rows = rows;
  const int64_t chunks = (d + kVec - 1) / kVec;
  const int64_t need = (chunks + kRowChunks - 1) / kRowChunks;
  int lanes = 1;
  while (lanes < need && lanes < kRowMaxLanes) lanes *= 2;
  if (need > lanes || rows == 0) return l;
  // Past 32 lanes a row's group spans warps, and row_sum reduces them through shared memory per block: one row
  // per block then.
  const auto blocks_for = [&](int ln) {
    const int per_block = ln > 32 ? 1 : kRowBlock / ln;
    return (rows + per_block - 1) / per_block;
  };
  // Few rows (decode): spread each row over more threads (fewer chunks each) until the grid has kRowMinBlocks
  // blocks or every thread has one chunk.
  while (blocks_for(lanes) < kRowMinBlocks && lanes < chunks && lanes < kRowMaxLanes) lanes *= 2;
  l.ok = true;
  l.lanes = lanes;
  const int per_block = lanes > 32 ? 1 : kRowBlock / lanes;
  l.threads = lanes * per_block;
  const int64_t blocks = blocks_for(lanes);
  if (blocks > int64_t(0x7fffffff)) throw Error(std::string("cuda ") + op + ": grid too large");
  l.blocks = unsigned(blocks);
  return l;
}

// This thread's row and its lane in the row's group. Threads past the last row stay (inactive) for the
// group's shuffles and barriers.
struct RowSlot {
  int64_t row;
  int lane;
  bool active;
};

__device__ __forceinline__ RowSlot row_slot(int lanes, int64_t rows) {
  const int per_block = blockDim.x / lanes;
  RowSlot s;
  s.row = int64_t(blockIdx.x) * per_block + threadIdx.x / lanes;
  s.lane = int(threadIdx.x % lanes);
  s.active = s.row < rows;
  return s;
}

// The sum of v over the row's group of `lanes` threads, returned to every thread of the group. Every thread of
// the block calls it (inactive ones with v = 0). `red` holds kRowMaxLanes / 32 floats of shared memory.
__device__ __forceinline__ float row_sum(float v, int lanes, float* red) {
  const int width = lanes < 32 ? lanes : 32;
  for (int m = width / 2; m > 0; m /= 2) v += __shfl_xor_sync(0xffffffffu, v, m);
  if (lanes <= 32) return v;
  // One row per block: the warps' sums in warp order.
  const int warp = int(threadIdx.x) / 32, warps = lanes / 32;
  if (threadIdx.x % 32 == 0) red[warp] = v;
  __syncthreads();
  float s = 0.f;
  for (int i = 0; i < warps; ++i) s += red[i];
  return s;
}

}  // namespace kimi::cuda
