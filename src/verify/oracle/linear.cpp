#include "verify/oracle/linear.h"

namespace kimi::oracle {

std::vector<double> linear(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>* y0,
                           int64_t m, int64_t n, int64_t k) {
  std::vector<double> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = y0 ? (*y0)[size_t(i * n + j)] : 0.0;
      for (int64_t l = 0; l < k; ++l) acc += x[size_t(i * k + l)] * w[size_t(j * k + l)];
      y[size_t(i * n + j)] = acc;
    }
  return y;
}

}  // namespace kimi::oracle
