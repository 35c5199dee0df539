#include "verify/oracle/kda.h"

#include <cmath>

namespace kimi::oracle {

namespace {
double sig(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}
double softplus_(double x) {
  return x > 30 ? x : std::log1p(std::exp(x));
}

double gate1(bool bounded, double A_log, double x, double lb) {
  if (bounded) return lb * sig(std::exp(A_log) * x);
  return -std::exp(A_log) * softplus_(x);
}
}  // namespace

Vec kda_gate(const Vec& f, int64_t H, int64_t K, bool bounded, const Vec& A_log, const Vec& dt_bias,
             double lower_bound) {
  Vec g(f.size());
  const int64_t rows = int64_t(f.size()) / (H * K);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < K; ++i) {
        const size_t e = size_t((r * H + h) * K + i);
        g[e] = gate1(bounded, A_log[size_t(h)], f[e] + dt_bias[size_t(h * K + i)], lower_bound);
      }
  return g;
}

KdaResult kda(const KdaProblem& p) {
  const int64_t B = p.B, T = p.T, H = p.H, K = p.K, V = p.V;
  // sequences as (batch row, first token, length)
  struct Seq {
    int64_t b, t0, len;
  };
  std::vector<Seq> seqs;
  if (p.cu.empty()) {
    for (int64_t b = 0; b < B; ++b) seqs.push_back({b, 0, T});
  } else {
    for (size_t n = 0; n + 1 < p.cu.size(); ++n) seqs.push_back({0, p.cu[n], p.cu[n + 1] - p.cu[n]});
  }
  const int64_t N = int64_t(seqs.size());
  const double scale = p.scale != 0 ? p.scale : 1.0 / std::sqrt(double(K));
  KdaResult res;
  res.o.assign(size_t(B * T * H * V), 0.0);
  res.ht.assign(size_t(N * H * K * V), 0.0);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t h = 0; h < H; ++h) {
      // S[i][j], K x V
      std::vector<double> S(static_cast<size_t>(K * V), 0.0);
      if (!p.h0.empty())
        for (int64_t e = 0; e < K * V; ++e) S[size_t(e)] = p.h0[size_t((n * H + h) * K * V + e)];
      for (int64_t s = 0; s < seqs[size_t(n)].len; ++s) {
        const int64_t tok = seqs[size_t(n)].b * T + seqs[size_t(n)].t0 + s;  // row of [B*T]
        const size_t xk = size_t((tok * H + h) * K), xv = size_t((tok * H + h) * V);
        std::vector<double> q(static_cast<size_t>(K)), k(static_cast<size_t>(K)), v(static_cast<size_t>(V)),
            g(static_cast<size_t>(K));
        for (int64_t i = 0; i < K; ++i) {
          q[size_t(i)] = p.q[xk + size_t(i)];
          k[size_t(i)] = p.k[xk + size_t(i)];
          g[size_t(i)] = p.g[xk + size_t(i)];
        }
        for (int64_t j = 0; j < V; ++j) v[size_t(j)] = p.v[xv + size_t(j)];
        if (p.l2norm) {
          double sq = 0, sk = 0;
          for (int64_t i = 0; i < K; ++i) {
            sq += q[size_t(i)] * q[size_t(i)];
            sk += k[size_t(i)] * k[size_t(i)];
          }
          for (int64_t i = 0; i < K; ++i) {
            q[size_t(i)] /= std::sqrt(sq + 1e-6);
            k[size_t(i)] /= std::sqrt(sk + 1e-6);
          }
        }
        for (int64_t i = 0; i < K; ++i) q[size_t(i)] *= scale;
        if (p.use_gate)
          for (int64_t i = 0; i < K; ++i)
            g[size_t(i)] = gate1(p.bounded, p.A_log[size_t(h)], g[size_t(i)] + p.dt_bias[size_t(h * K + i)],
                                 p.lower_bound);
        double beta = p.beta[size_t(tok * H + h)];
        if (p.beta_sigmoid) beta = sig(beta);
        // S <- Diag(exp(g)) S
        for (int64_t i = 0; i < K; ++i)
          for (int64_t j = 0; j < V; ++j) S[size_t(i * V + j)] *= std::exp(g[size_t(i)]);
        // e = v - S^T k
        std::vector<double> e(static_cast<size_t>(V));
        for (int64_t j = 0; j < V; ++j) {
          double acc = 0;
          for (int64_t i = 0; i < K; ++i) acc += S[size_t(i * V + j)] * k[size_t(i)];
          e[size_t(j)] = v[size_t(j)] - acc;
        }
        // S <- S + beta k e^T
        for (int64_t i = 0; i < K; ++i)
          for (int64_t j = 0; j < V; ++j) S[size_t(i * V + j)] += beta * k[size_t(i)] * e[size_t(j)];
        // o = S^T q
        for (int64_t j = 0; j < V; ++j) {
          double acc = 0;
          for (int64_t i = 0; i < K; ++i) acc += S[size_t(i * V + j)] * q[size_t(i)];
          res.o[xv + size_t(j)] = acc;
        }
      }
      for (int64_t e = 0; e < K * V; ++e) res.ht[size_t((n * H + h) * K * V + e)] = S[size_t(e)];
    }
  }
  return res;
}

}  // namespace kimi::oracle
