// dist/balance.cpp: Quantile Balancing from merged per-expert histograms (the math and the bound: balance.h).
#include "dist/balance.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "cpu/tensor_io.h"
#include "kimi/error.h"

namespace kimi::dist {

QuantileBalanceStats quantile_balance(Comm& comm, TensorView scores, TensorView bias, int top_k, int bins) {
  const std::string fn = "dist::quantile_balance";
  require_host_memory(comm, fn.c_str());
  if (scores.ndim != 2 || scores.dtype != DType::f32)
    throw Error(fn + ": argument 'scores': expected f32 [T, E], got " + scores.shape_string());
  const int64_t t_local = scores.size(0), e = scores.size(1);
  if (bias.ndim != 1 || bias.dtype != DType::f32 || bias.size(0) != e)
    throw Error(fn + ": argument 'bias': expected f32 [" + std::to_string(e) + "] (E of scores), got " +
                bias.shape_string());
  if (top_k < 1 || top_k >= e)
    throw Error(fn + ": argument 'top_k': expected 1 <= top_k < " + std::to_string(e) + ", got " +
                std::to_string(top_k));
  if (bins < 1) throw Error(fn + ": argument 'bins': expected >= 1, got " + std::to_string(bins));
  const auto se = size_t(e), sb = size_t(bins);
  const std::vector<float> s = cpu::to_f32(scores), bf = cpu::to_f32(bias);
  const std::vector<double> b(bf.begin(), bf.end());

  // Local margins m_ij = s_ij + b_j - c_i, and their per-expert range.
  std::vector<double> m(size_t(t_local) * se), v(se);
  std::vector<double> range(2 * se);  // [lo_0 .. lo_E-1, -hi_0 .. -hi_E-1] (both as minima)
  std::fill(range.begin(), range.end(), std::numeric_limits<double>::infinity());
  for (int64_t i = 0; i < t_local; ++i) {
    for (size_t j = 0; j < se; ++j) v[j] = double(s[size_t(i) * se + j]) + b[j];
    std::vector<double> w = v;
    std::nth_element(w.begin(), w.begin() + top_k, w.end(), std::greater<double>());
    const double c = w[size_t(top_k)];
    for (size_t j = 0; j < se; ++j) {
      const double mij = v[j] - c;
      m[size_t(i) * se + j] = mij;
      range[j] = std::min(range[j], mij);
      range[se + j] = std::min(range[se + j], -mij);
    }
  }
  int64_t total = t_local;
  comm.all_reduce_sum(std::span<int64_t>(&total, 1));
  QuantileBalanceStats st;
  st.tokens = total;
  if (total == 0) return st;  // no batch anywhere: the bias stays as it is
  std::vector<double> ranges(size_t(comm.size()) * 2 * se);
  comm.all_gather(range.data(), range.size() * sizeof(double), ranges.data());
  std::vector<double> lo(se, std::numeric_limits<double>::infinity()), hi(se, -std::numeric_limits<double>::infinity());
  for (size_t r = 0; r < size_t(comm.size()); ++r)
    for (size_t j = 0; j < se; ++j) {
      lo[j] = std::min(lo[j], ranges[r * 2 * se + j]);
      hi[j] = std::max(hi[j], -ranges[r * 2 * se + se + j]);
    }

  // Merged histograms [E, B].
  std::vector<double> width(se);
  for (size_t j = 0; j < se; ++j) {
    width[j] = (hi[j] - lo[j]) / double(bins);
    st.max_bin_width = std::max(st.max_bin_width, width[j]);
  }
  std::vector<int64_t> hist(se * sb, 0);
  for (int64_t i = 0; i < t_local; ++i)
    for (size_t j = 0; j < se; ++j) {
      const double x = m[size_t(i) * se + j];
      const auto bin = width[j] > 0 ? std::min<int64_t>(bins - 1, int64_t((x - lo[j]) / width[j])) : 0;
      ++hist[j * sb + size_t(bin)];
    }
  comm.all_reduce_sum(std::span<int64_t>(hist));

  // Order statistic at 0-based position k of expert j, read in its bin.
  auto order_stat = [&](size_t j, int64_t k) {
    int64_t before = 0;
    for (size_t bin = 0; bin < sb; ++bin) {
      const int64_t n = hist[j * sb + bin];
      if (k < before + n) return lo[j] + (double(bin) + (double(k - before) + 0.5) / double(n)) * width[j];
      before += n;
    }
    return hi[j];  // not reached: the counts sum to T > k
  };
  const double h = std::clamp(double(total) - double(top_k) * double(total) / double(e) - 0.5, 0.0,
                              double(total - 1));
  const auto k0 = int64_t(std::floor(h));
  const double frac = h - double(k0);
  std::vector<double> nb(se);
  double mean = 0;
  for (size_t j = 0; j < se; ++j) {
    const double a = order_stat(j, k0), c = k0 + 1 < total ? order_stat(j, k0 + 1) : a;
    nb[j] = b[j] - (a + frac * (c - a));
    mean += nb[j];
  }
  mean /= double(e);
  std::vector<float> out(se);
  for (size_t j = 0; j < se; ++j) out[j] = float(nb[j] - mean);
  cpu::from_f32(out.data(), bias);
  return st;
}

}  // namespace kimi::dist
