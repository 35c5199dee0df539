#include "verify/oracle/norm.h"

#include <cmath>

namespace kimi::oracle {

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double silu(double x) { return x * sigmoid(x); }
double softplus(double x) { return x > 30 ? x : std::log1p(std::exp(x)); }

Vec rms_norm(const Vec& x, const Vec& w, int64_t rows, int64_t d, double eps, const Round& round_x) {
  Vec y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double ms = 0;
    for (int64_t i = 0; i < d; ++i) ms += x[r * d + i] * x[r * d + i];
    const double s = 1.0 / std::sqrt(ms / d + eps);
    for (int64_t i = 0; i < d; ++i) y[r * d + i] = w[i] * round_x(x[r * d + i] * s);
  }
  return y;
}

Vec gated_rms_norm(const Vec& o, const Vec* z, const Vec& w, int64_t rows, int64_t d, double eps) {
  Vec y = rms_norm(o, w, rows, d, eps, [](double v) { return v; });
  if (z)
    for (size_t i = 0; i < y.size(); ++i) y[i] *= sigmoid((*z)[i]);
  return y;
}

Vec l2_norm(const Vec& x, int64_t rows, int64_t d, double eps) {
  Vec y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += x[r * d + i] * x[r * d + i];
    for (int64_t i = 0; i < d; ++i) y[r * d + i] = x[r * d + i] / std::sqrt(ss + eps);
  }
  return y;
}

}  // namespace kimi::oracle
