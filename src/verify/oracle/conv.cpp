#include "verify/oracle/conv.h"

#include <cmath>

namespace kimi::oracle {

ConvResult short_conv(const std::vector<double>& x, const std::vector<int64_t>& lens, int64_t C,
                      const std::vector<double>& w, int64_t W, const std::vector<double>* cache_in, bool silu) {
  const int64_t N = int64_t(lens.size()), H = W - 1;
  int64_t total = 0;
  for (int64_t len : lens) total += len;
  ConvResult r;
  r.y.assign(size_t(total * C), 0.0);
  r.cache.assign(size_t(N * C * H), 0.0);
  int64_t start = 0;
  for (int64_t n = 0; n < N; ++n) {
    const int64_t len = lens[size_t(n)];
    // input(k, c): token k of this sequence; k < 0 reads the cache (or zero).
    auto input = [&](int64_t k, int64_t c) -> double {
      if (k >= 0) return x[size_t((start + k) * C + c)];
      if (k < -H) return 0.0;
      if (!cache_in) return 0.0;
      return (*cache_in)[size_t((n * C + c) * H + (H + k))];
    };
    for (int64_t t = 0; t < len; ++t) {
      for (int64_t c = 0; c < C; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < W; ++j) acc += w[size_t(c * W + j)] * input(t - H + j, c);
        if (silu) acc = acc / (1.0 + std::exp(-acc));
        r.y[size_t((start + t) * C + c)] = acc;
      }
    }
    for (int64_t c = 0; c < C; ++c)
      for (int64_t j = 0; j < H; ++j) r.cache[size_t((n * C + c) * H + j)] = input(len - H + j, c);
    start += len;
  }
  return r;
}

}  // namespace kimi::oracle
