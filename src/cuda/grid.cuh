// src/cuda/grid.cuh: the grids of the simple launches, checked against the grid limits with an error naming
// the operator: 1-D (one thread per item), and columns x rows (x tiles the columns, `threads` each; y takes
// at most 65535 rows and the kernel strides over the rest with gridDim.y).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kimi/error.h"

namespace kimi::cuda {

inline unsigned grid_1d(int64_t items, int threads, const char* op) {
  const int64_t b = (items + threads - 1) / threads;
  if (b > int64_t(0x7fffffff))
    throw Error(std::string("cuda ") + op + ": grid too large (" + std::to_string(items) + " items)");
  return unsigned(std::max<int64_t>(b, 1));
}

inline dim3 grid_cols_rows(int64_t cols, int64_t rows, int threads, const char* op) {
  constexpr int64_t kMaxGridY = 65535;
  const int64_t gx = (cols + threads - 1) / threads;
  if (gx > int64_t(0x7fffffff))
    throw Error(std::string("cuda ") + op + ": grid too large (" + std::to_string(cols) + " columns)");
  return dim3(unsigned(std::max<int64_t>(gx, 1)), unsigned(std::clamp<int64_t>(rows, 1, kMaxGridY)));
}

}  // namespace kimi::cuda
