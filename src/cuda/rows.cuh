// src/cuda/rows.cuh: the launch of a row-wise kernel over [..., D] views (norms, KDA gate / beta): one warp per
// row, kRowWarps rows per CTA; row r's element offset is computed in the kernel from the view's leading shape and
// strides (RowMap, passed by value): no table is built or uploaded, so every row-wise launcher is capturable in a
// CUDA graph and does no host-to-device copy.
//
// A view's leading dimensions may have any strides (the last one has stride 1, checked by the caller); row r
// of a view is its r-th row in row-major order of the leading dimensions.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <string>

#include "cuda/check.cuh"
#include "kimi/error.h"
#include "kimi/tensor.h"

namespace kimi::cuda {

inline constexpr int kRowWarps = 8;  // rows per CTA: one warp per row

// The element offset of row r of a [..., D] view: its leading dimensions (up to kMaxDims - 1) and their strides.
// map[r] reads like the offset table it replaces.
struct RowMap {
  int nd = 0;
  int64_t size[kMaxDims - 1] = {}, stride[kMaxDims - 1] = {};
  // NOTE: unrolled over the largest rank with guards: a run-time index into size / stride would copy the whole
  //   map from the kernel's parameters to local memory in every thread (a stack frame and ~100 bytes of stores).
  __host__ __device__ __forceinline__ int64_t operator[](int64_t r) const {
    int64_t o = 0;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
    for (int d = kMaxDims - 2; d >= 0; --d) {
      if (d >= nd) continue;
      o += (r % size[d]) * stride[d];
      r /= size[d];
    }
    return o;
  }
};

inline RowMap row_map(const TensorView& t) {
  RowMap m;
  if (!t.present()) return m;
  m.nd = t.ndim - 1;
  for (int d = 0; d < m.nd; ++d) m.size[d] = t.shape[d], m.stride[d] = t.strides[d];
  return m;
}

inline int64_t row_count(const TensorView& t) {
  int64_t rows = 1;
  for (int d = 0; d + 1 < t.ndim; ++d) rows *= t.shape[d];
  return rows;
}

// The grid (one warp per row) over the rows of the first view; the views share its row count (checked by the
// operator).
struct RowLaunch {
  int64_t rows = 0;
  unsigned blocks = 0;
};

inline RowLaunch row_launch(const char* op, const TensorView& first) {
  RowLaunch l;
  l.rows = first.present() ? row_count(first) : 0;
  if (l.rows == 0) return l;
  const int64_t blocks = (l.rows + kRowWarps - 1) / kRowWarps;
  if (blocks > int64_t(0x7fffffff)) throw Error(std::string("cuda ") + op + ": grid too large");
  l.blocks = unsigned(blocks);
  return l;
}

}  // namespace kimi::cuda
