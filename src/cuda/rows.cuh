// src/cuda/rows.cuh: the launch of a row-wise kernel over [..., D] views (norms, KDA gate / beta): one warp per
// row, kRowWarps rows per CTA, the element offset of every row of every present view uploaded once per call.
//
// A view's leading dimensions may have any strides (the last one has stride 1, checked by the caller); row r
// of a view is its r-th row in row-major order of the leading dimensions.
#pragma once

#include <cuda_runtime.h>

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "cuda/check.cuh"
#include "cuda/scratch.cuh"
#include "kimi/tensor.h"

namespace kimi::cuda {

inline constexpr int kRowWarps = 8;  // rows per CTA: one warp per row

// Element offsets of every row of a [..., D] view (leading dims any strides).
inline std::vector<int64_t> row_offsets(const TensorView& t) {
  int64_t rows = 1;
  for (int d = 0; d + 1 < t.ndim; ++d) rows *= t.shape[d];
  std::vector<int64_t> off(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    int64_t rem = r, o = 0;
    for (int d = t.ndim - 2; d >= 0; --d) {
      o += (rem % t.shape[d]) * t.strides[d];
      rem /= t.shape[d];
    }
    off[size_t(r)] = o;
  }
  return off;
}

// The capture guard, the grid (one warp per row), and the row offsets of every present view (all
// with the first view's rows) uploaded back to back: view i's offsets at offsets->get<int64_t>() + i * rows,
// counting present views only. The caller makes the views' device current (DeviceGuard) before calling.
struct RowLaunch {
  int64_t rows = 0;
  std::optional<Scratch> offsets;
  unsigned blocks = 0;
};

inline RowLaunch row_launch(const char* op, std::initializer_list<TensorView> views, cudaStream_t s) {
  RowLaunch l;
  std::vector<int64_t> all;
  for (const TensorView& v : views) {
    if (!v.present()) continue;
    const std::vector<int64_t> off = row_offsets(v);
    all.insert(all.end(), off.begin(), off.end());
    if (l.rows == 0) l.rows = int64_t(off.size());
  }
  if (l.rows == 0) return l;
  refuse_capture(s, op);
  const int64_t blocks = (l.rows + kRowWarps - 1) / kRowWarps;
  if (blocks > int64_t(0x7fffffff)) throw Error(std::string("cuda ") + op + ": grid too large");
  l.blocks = unsigned(blocks);
  l.offsets.emplace(upload(all, s));
  return l;
}

}  // namespace kimi::cuda
