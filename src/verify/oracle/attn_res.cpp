#include "verify/oracle/attn_res.h"

#include <algorithm>
#include <cmath>

namespace kimi::oracle {

std::vector<double> attn_res(const std::vector<double>& partial, const std::vector<std::vector<double>>& blocks,
                             const std::vector<double>& proj_w, const std::vector<double>& norm_w, int64_t T,
                             int64_t d, double eps) {
  std::vector<const std::vector<double>*> V;
  for (const auto& b : blocks) V.push_back(&b);
  V.push_back(&partial);
  const size_t m = V.size();
  std::vector<double> out(size_t(T * d), 0.0);
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> s(m);
    for (size_t c = 0; c < m; ++c) {
      const std::vector<double>& v = *V[c];
      double ms = 0;
      for (int64_t i = 0; i < d; ++i) ms += v[size_t(t * d + i)] * v[size_t(t * d + i)];
      ms /= double(d);
      const double inv = 1.0 / std::sqrt(ms + eps);
      double score = 0;
      for (int64_t i = 0; i < d; ++i) score += (v[size_t(t * d + i)] * inv) * (norm_w[size_t(i)] * proj_w[size_t(i)]);
      s[c] = score;
    }
    double mx = s[0];
    for (size_t c = 1; c < m; ++c) mx = std::max(mx, s[c]);
    double z = 0;
    for (size_t c = 0; c < m; ++c) z += std::exp(s[c] - mx);
    for (size_t c = 0; c < m; ++c) {
      const double p = std::exp(s[c] - mx) / z;
      for (int64_t i = 0; i < d; ++i) out[size_t(t * d + i)] += p * (*V[c])[size_t(t * d + i)];
    }
  }
  return out;
}

}  // namespace kimi::oracle
