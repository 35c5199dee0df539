// src/verify/oracle/linear.h: fp64 oracle of y = x W^T (+ y0), written plainly. Row-major vectors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kimi::oracle {

// x: [m, k]; w: [n, k]; y0: [m, n] or nullptr (beta = 0). Returns [m, n].
std::vector<double> linear(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>* y0,
                           int64_t m, int64_t n, int64_t k);

}  // namespace kimi::oracle
