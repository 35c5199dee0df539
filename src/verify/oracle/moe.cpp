#include "verify/oracle/moe.h"

#include <algorithm>
#include <cmath>

namespace kimi::oracle {

namespace {
double sigm(double x) { return 1.0 / (1.0 + std::exp(-x)); }
}  // namespace

Routing moe_router(const Vec& logits, const Vec& bias, int64_t t, int64_t e, int64_t k, bool renormalize,
                   double scaling) {
  Routing r;
  r.biased.resize(size_t(t * e));
  for (int64_t i = 0; i < t; ++i) {
    Vec s(static_cast<size_t>(e));
    for (int64_t j = 0; j < e; ++j) {
      s[j] = sigm(logits[i * e + j]);
      r.biased[i * e + j] = s[j] + (bias.empty() ? 0.0 : bias[j]);
    }
    // selection sort: K times pick the largest remaining biased score, the lowest index on ties
    std::vector<bool> taken(static_cast<size_t>(e), false);
    std::vector<int64_t> sel;
    for (int64_t n = 0; n < k; ++n) {
      int64_t best = -1;
      for (int64_t j = 0; j < e; ++j)
        if (!taken[j] && (best < 0 || r.biased[i * e + j] > r.biased[i * e + best])) best = j;
      taken[best] = true;
      sel.push_back(best);
    }
    double sum = 0;
    for (int64_t j : sel) sum += s[j];
    for (int64_t j : sel) {
      double w = s[j];
      if (renormalize) w = w / (sum + 1e-20);
      r.ids.push_back(j);
      r.weights.push_back(w * scaling);
    }
  }
  return r;
}

Vec moe_quantile_balance(const Vec& scores, const Vec& bias, int64_t t, int64_t e, int64_t k) {
  // c_i = (K+1)-th largest biased score of token i
  Vec c(static_cast<size_t>(t));
  for (int64_t i = 0; i < t; ++i) {
    Vec v(static_cast<size_t>(e));
    for (int64_t j = 0; j < e; ++j) v[j] = scores[i * e + j] + bias[j];
    std::sort(v.begin(), v.end());
    c[i] = v[e - 1 - k];
  }
  // delta_j = Hazen quantile at level 1 - K/E: sorted margins (ascending), 0-based position
  // h = (1 - K/E) T - 1/2 clamped to [0, T-1], linear interpolation between neighbours.
  Vec nb(static_cast<size_t>(e));
  double h = (1.0 - double(k) / double(e)) * double(t) - 0.5;
  h = std::min(std::max(h, 0.0), double(t - 1));
  const int64_t lo = int64_t(std::floor(h));
  const int64_t hi = std::min(lo + 1, t - 1);
  for (int64_t j = 0; j < e; ++j) {
    Vec m(static_cast<size_t>(t));
    for (int64_t i = 0; i < t; ++i) m[i] = scores[i * e + j] + bias[j] - c[i];
    std::sort(m.begin(), m.end());
    const double delta = m[lo] + (h - double(lo)) * (m[hi] - m[lo]);
    nb[j] = bias[j] - delta;
  }
  double mean = 0;
  for (double v : nb) mean += v;
  mean /= double(e);
  for (double& v : nb) v -= mean;
  return nb;
}

double glu(double gate, double up, const Act& a) {
  if (!a.situ) return gate * sigm(gate) * up;
  const double act = a.beta * std::tanh(gate / a.beta) * sigm(gate);
  const double u = a.lbeta > 0 ? a.lbeta * std::tanh(up / a.lbeta) : up;
  return act * u;
}

Vec matmul(const Vec& x, const Vec& w, int64_t m, int64_t in, int64_t out) {
  Vec y(static_cast<size_t>(m * out), 0.0);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double acc = 0;
      for (int64_t i = 0; i < in; ++i) acc += x[r * in + i] * w[o * in + i];
      y[r * out + o] = acc;
    }
  return y;
}

Vec mlp(const Vec& x, const Mlp& w, int64_t m, int64_t d, const Act& a) {
  const Vec g = matmul(x, w.gate, m, d, w.inter);
  const Vec u = matmul(x, w.up, m, d, w.inter);
  Vec h(g.size());
  for (size_t i = 0; i < h.size(); ++i) h[i] = glu(g[i], u[i], a);
  return matmul(h, w.down, m, w.inter, d);
}

MoeOut latent_moe(const Vec& x, const MoeWeights& w, int64_t t, int64_t d, int64_t k, bool renormalize,
                  double scaling, const Act& a, double norm_eps) {
  MoeOut res;
  const int64_t e = w.num_experts;
  const Vec logits = matmul(x, w.router, t, d, e);
  res.routing = moe_router(logits, w.router_bias, t, e, k, renormalize, scaling);
  const int64_t dl = w.latent ? w.latent : d;
  const Vec z = w.latent ? matmul(x, w.latent_down, t, d, dl) : x;
  Vec y(static_cast<size_t>(t * dl), 0.0);
  for (int64_t ex = 0; ex < e; ++ex) {
    bool used = false;
    for (int64_t n = 0; n < t * k; ++n) used = used || res.routing.ids[n] == ex;
    if (!used) continue;
    const Mlp m = w.expert(ex);
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = 0; j < k; ++j) {
        if (res.routing.ids[i * k + j] != ex) continue;
        const Vec zi(z.begin() + i * dl, z.begin() + (i + 1) * dl);
        const Vec yi = mlp(zi, m, 1, dl, a);
        for (int64_t c = 0; c < dl; ++c) y[i * dl + c] += res.routing.weights[i * k + j] * yi[c];
      }
  }
  if (!w.latent_norm.empty())
    for (int64_t i = 0; i < t; ++i) {
      double ms = 0;
      for (int64_t c = 0; c < dl; ++c) ms += y[i * dl + c] * y[i * dl + c];
      const double s = 1.0 / std::sqrt(ms / double(dl) + norm_eps);
      for (int64_t c = 0; c < dl; ++c) y[i * dl + c] = w.latent_norm[c] * (y[i * dl + c] * s);
    }
  res.out = w.latent ? matmul(y, w.latent_up, t, dl, d) : y;
  if (w.shared) {
    const Vec sh = mlp(x, *w.shared, t, d, a);
    for (size_t i = 0; i < res.out.size(); ++i) res.out[i] += sh[i];
  }
  return res;
}

Vec mxfp4_decode(const std::vector<uint8_t>& packed, const std::vector<uint8_t>& scale, int64_t out, int64_t in) {
  static const double mag[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  Vec w(static_cast<size_t>(out * in));
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) {
      const uint8_t byte = packed[o * (in / 2) + i / 2];
      const int code = (i % 2 == 0) ? (byte & 0x0F) : (byte >> 4);
      const double v = mag[code & 7] * ((code & 8) ? -1.0 : 1.0);
      const int ex = scale[o * (in / 32) + i / 32];
      w[o * in + i] = ex == 255 ? NAN : v * std::pow(2.0, ex - 127);
    }
  return w;
}

}  // namespace kimi::oracle
