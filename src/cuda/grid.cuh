// src/cuda/grid.cuh: the 1-D grid of an elementwise launch (one thread per item), checked against the
// grid limit with an error naming the operator.
#pragma once

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

}  // namespace kimi::cuda
