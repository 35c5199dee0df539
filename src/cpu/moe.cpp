// CPU MoE (SPEC 7): sigmoid router, Quantile Balancing, GLU activations, dense MLP and the latent MoE
// block. Projections go through cpu::linear (panels of weights converted to f32, sgemm); activations
// and routing are fp32, the Quantile Balancing statistics fp64.
#include "cpu/moe.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "cpu/linear.h"
#include "cpu/norm.h"
#include "cpu/tensor_io.h"

namespace kimi::cpu {

namespace {

// A contiguous row-major f32 [rows, cols] view of a scratch buffer.
TensorView f32_view(float* data, int64_t rows, int64_t cols) { return TensorView(data, DType::f32, {rows, cols}); }

// ctx, or one thread when the work (multiply-adds or elements) is too small to pay for a parallel region
// (a fork/join costs microseconds, and far more on a loaded machine).
Context sized(const Context& ctx, int64_t work, int64_t min_work = int64_t(1) << 20) {
  Context c = ctx;
  if (work < min_work) c.cpu_threads = 1;
  return c;
}

float sigmoid(float v) { return 1.f / (1.f + std::exp(-v)); }

// h = act(g) * up' for n values (fp32). Finite for any finite input: exp(-g) overflows to inf for
// g << 0 and 1 / (1 + inf) = 0.
void glu_row(const float* g, const float* u, int64_t n, const GluParams& p, float* h) {
  if (p.act == GluAct::silu) {
    for (int64_t i = 0; i < n; ++i) h[i] = g[i] * sigmoid(g[i]) * u[i];
    return;
  }
  const float b = p.situ_beta, lb = p.situ_linear_beta;
  for (int64_t i = 0; i < n; ++i) {
    const float a = b * std::tanh(g[i] / b) * sigmoid(g[i]);
    h[i] = a * (lb > 0.f ? lb * std::tanh(u[i] / lb) : u[i]);
  }
}

// Sort key of a biased score: NaN ranks below everything (never selected before a number).
float key(float v) { return std::isnan(v) ? -INFINITY : v; }

// Top-k of one row of biased scores: sel[0..k) in descending order, ties to the lower index.
void top_k(const float* biased, int64_t e_count, int k, int32_t* sel) {
  int n = 0;
  for (int64_t e = 0; e < e_count; ++e) {
    const float v = key(biased[e]);
    if (n == k && !(v > key(biased[sel[k - 1]]))) continue;  // equal keys keep the earlier (lower) index
    int pos = n == k ? k - 1 : n++;
    while (pos > 0 && v > key(biased[sel[pos - 1]])) {
      sel[pos] = sel[pos - 1];
      --pos;
    }
    sel[pos] = int32_t(e);
  }
}

// y[M, d] (+)= down(act(gate x) * up x) for an f32-or-any-float x; scratch g, u of M * I floats.
void mlp_rows(TensorView x, const MlpWeights& w, const GluParams& p, TensorView y, float beta, const Context& ctx_in,
              std::vector<float>& g, std::vector<float>& u) {
  const int64_t m = x.size(0), inter = w.gate.out_features();
  if (m == 0) return;
  const Context ctx = sized(ctx_in, m * inter * x.size(1));
  g.resize(static_cast<size_t>(m * inter));
  u.resize(static_cast<size_t>(m * inter));
  const TensorView gv = f32_view(g.data(), m, inter), uv = f32_view(u.data(), m, inter);
  cpu::linear(x, w.gate, gv, 0.f, ctx);
  cpu::linear(x, w.up, uv, 0.f, ctx);
#pragma omp parallel for num_threads(threads(ctx)) schedule(static) if (m * inter > 65536)
  for (int64_t r = 0; r < m; ++r) {
    float* gr = g.data() + r * inter;
    glu_row(gr, u.data() + r * inter, inter, p, gr);
  }
  cpu::linear(gv, w.down, y, beta, ctx);
}
}  // namespace

void moe_router(TensorView logits, TensorView bias, const RouterParams& p, TensorView ids, TensorView weights,
                const Context& ctx_in) {
  const int64_t t_count = logits.size(0), e_count = logits.size(1);
  const Context ctx = sized(ctx_in, t_count * e_count, 16384);
  const int k = p.top_k;
  const std::vector<float> b = bias.present() ? to_f32(bias) : std::vector<float>(static_cast<size_t>(e_count), 0.f);
#pragma omp parallel num_threads(threads(ctx))
  {
    std::vector<float> s(static_cast<size_t>(e_count)), biased(static_cast<size_t>(e_count));
    std::vector<int32_t> sel(static_cast<size_t>(k));
#pragma omp for schedule(static)
    for (int64_t t = 0; t < t_count; ++t) {
      load_row(logits, t, s.data());
      for (int64_t e = 0; e < e_count; ++e) {
        s[size_t(e)] = sigmoid(s[size_t(e)]);
        biased[size_t(e)] = s[size_t(e)] + b[size_t(e)];
      }
      top_k(biased.data(), e_count, k, sel.data());
      double sum = 0;
      for (int j = 0; j < k; ++j) sum += s[size_t(sel[size_t(j)])];
      auto* id_row = reinterpret_cast<int32_t*>(row_ptr(ids, t));
      auto* w_row = reinterpret_cast<float*>(row_ptr(weights, t));
      for (int j = 0; j < k; ++j) {
        const float wj = s[size_t(sel[size_t(j)])];
        id_row[j] = sel[size_t(j)];
        w_row[j] = (p.renormalize ? float(double(wj) / (sum + 1e-20)) : wj) * p.scaling;
      }
    }
  }
}

void moe_quantile_balance(TensorView scores, TensorView bias, int top_k, const Context& ctx_in) {
  const int64_t t_count = scores.size(0), e_count = scores.size(1);
  const Context ctx = sized(ctx_in, t_count * e_count, 16384);
  if (t_count == 0) return;  // no batch, no evidence: the bias stays as it is
  const std::vector<float> bf = to_f32(bias);
  const std::vector<float> s = to_f32(scores);  // [T, E] contiguous
  std::vector<double> b(bf.begin(), bf.end());
  const auto st = size_t(t_count), se = size_t(e_count);
  // c_i: the (K+1)-th largest biased score of token i.
  std::vector<double> c(st);
#pragma omp parallel num_threads(threads(ctx))
  {
    std::vector<double> v(se);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < t_count; ++i) {
      for (size_t e = 0; e < se; ++e) v[e] = double(s[size_t(i) * se + e]) + b[e];
      std::nth_element(v.begin(), v.begin() + top_k, v.end(), std::greater<double>());
      c[size_t(i)] = v[size_t(top_k)];
    }
  }
  // delta_j: Hazen quantile of expert j's margins at level 1 - K/E, i.e. the order statistic at
  // 0-based fractional position h = T - q - 1/2 (q = K T / E), clamped to [0, T-1], interpolated.
  const double h = std::clamp(double(t_count) - double(top_k) * double(t_count) / double(e_count) - 0.5, 0.0,
                              double(t_count - 1));
  const auto lo = int64_t(std::floor(h));
  const double frac = h - double(lo);
  std::vector<double> delta(se);
#pragma omp parallel num_threads(threads(ctx))
  {
    std::vector<double> m(st);
#pragma omp for schedule(static)
    for (int64_t j = 0; j < e_count; ++j) {
      for (size_t i = 0; i < st; ++i) m[i] = double(s[i * se + size_t(j)]) + b[size_t(j)] - c[i];
      std::nth_element(m.begin(), m.begin() + lo, m.end());
      const double m_lo = m[size_t(lo)];
      const double m_hi = lo + 1 < t_count ? *std::min_element(m.begin() + lo + 1, m.end()) : m_lo;
      delta[size_t(j)] = m_lo + frac * (m_hi - m_lo);
    }
  }
  double mean = 0;
  for (size_t j = 0; j < se; ++j) {
    b[j] -= delta[j];
    mean += b[j];
  }
  mean /= double(e_count);
  std::vector<float> out(se);
  for (size_t j = 0; j < se; ++j) out[j] = float(b[j] - mean);
  from_f32(out.data(), bias);
}

void glu(TensorView gate, TensorView up, const GluParams& p, TensorView h, const Context& ctx_in) {
  const int64_t rows = num_rows(gate), n = gate.size(-1);
  const Context ctx = sized(ctx_in, rows * n, 65536);
#pragma omp parallel num_threads(threads(ctx))
  {
    std::vector<float> g(static_cast<size_t>(n)), u(static_cast<size_t>(n));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      load_row(gate, r, g.data());
      load_row(up, r, u.data());
      glu_row(g.data(), u.data(), n, p, g.data());
      store_row(h, r, g.data());
    }
  }
}

void mlp(TensorView x, const MlpWeights& w, const GluParams& p, TensorView y, float beta, const Context& ctx) {
  std::vector<float> g, u;
  mlp_rows(x, w, p, y, beta, ctx, g, u);
}

void latent_moe(TensorView x, const LatentMoeWeights& w, const RouterParams& router, const GluParams& act,
                float norm_eps, TensorView out, TensorView ids, TensorView weights, float beta, const Context& ctx) {
  const int64_t t_count = x.size(0), d = x.size(1), e_count = int64_t(w.experts.size());
  const int k = router.top_k;
  if (t_count == 0) return;
  const bool latent = w.latent_down.w.present();
  const int64_t dl = latent ? w.latent_down.out_features() : d;
  const auto st = size_t(t_count);

  // 1. Routing: logits = x W_r^T in fp32, then the sigmoid router.
  std::vector<float> logits(st * size_t(e_count)), wts(st * size_t(k));
  std::vector<int32_t> sel(st * size_t(k));
  cpu::linear(x, w.router, f32_view(logits.data(), t_count, e_count), 0.f, sized(ctx, t_count * e_count * d));
  cpu::moe_router(f32_view(logits.data(), t_count, e_count), w.router_bias, router,
             TensorView(sel.data(), DType::i32, {t_count, int64_t(k)}), f32_view(wts.data(), t_count, k), ctx);
  for (int64_t t = 0; t < t_count; ++t) {
    if (ids.present()) std::copy_n(&sel[size_t(t * k)], k, reinterpret_cast<int32_t*>(row_ptr(ids, t)));
    if (weights.present()) std::copy_n(&wts[size_t(t * k)], k, reinterpret_cast<float*>(row_ptr(weights, t)));
  }

  // 2. z = W_ld x (latent) or x, as f32 [T, Dl].
  std::vector<float> z;
  if (latent) {
    z.resize(st * size_t(dl));
    cpu::linear(x, w.latent_down, f32_view(z.data(), t_count, dl), 0.f, sized(ctx, t_count * dl * d));
  } else {
    z = to_f32(x);
  }

  // 3. Group the (token, slot) pairs by expert (token order within an expert).
  std::vector<int64_t> start(size_t(e_count) + 1, 0);
  for (int32_t e : sel) ++start[size_t(e) + 1];
  for (size_t e = 0; e < size_t(e_count); ++e) start[e + 1] += start[e];
  std::vector<int64_t> slot(sel.size());  // slot indices t * K + j, grouped by expert
  {
    std::vector<int64_t> fill(start.begin(), start.end() - 1);
    for (size_t i = 0; i < sel.size(); ++i) slot[size_t(fill[size_t(sel[i])]++)] = int64_t(i);
  }

  // 4. y = sum_k w_k Expert_{sel_k}(z): one MLP call per expert over its gathered rows.
  std::vector<float> y(st * size_t(dl), 0.f), zg, ye, g, u;
  for (int64_t e = 0; e < e_count; ++e) {
    const int64_t n = start[size_t(e) + 1] - start[size_t(e)];
    if (n == 0) continue;
    const int64_t* rows = &slot[size_t(start[size_t(e)])];
    zg.resize(size_t(n * dl));
    ye.resize(size_t(n * dl));
    for (int64_t r = 0; r < n; ++r)
      std::copy_n(&z[size_t(rows[r] / k * dl)], dl, &zg[size_t(r * dl)]);
    mlp_rows(f32_view(zg.data(), n, dl), w.experts[size_t(e)], act, f32_view(ye.data(), n, dl), 0.f, ctx, g, u);
    for (int64_t r = 0; r < n; ++r) {
      const float wk = wts[size_t(rows[r])];
      float* yt = &y[size_t(rows[r] / k * dl)];
      const float* src = &ye[size_t(r * dl)];
      for (int64_t i = 0; i < dl; ++i) yt[i] += wk * src[i];
    }
  }

  // 5. Latent RMSNorm (f32, so rms_norm's rounding to the input dtype is the identity), 6. up-projection.
  const TensorView yv = f32_view(y.data(), t_count, dl);
  if (w.latent_norm.present()) cpu::rms_norm(yv, w.latent_norm, norm_eps, yv, sized(ctx, t_count * dl, 65536));
  std::vector<float> res;
  if (latent) {
    res.resize(st * size_t(d));
    cpu::linear(yv, w.latent_up, f32_view(res.data(), t_count, d), 0.f, sized(ctx, t_count * dl * d));
  } else {
    res = std::move(y);
  }

  // 7. + Shared(x), accumulated in f32; out is written once at the end (so it may alias x at beta 0), after the
  //    f32 sum with its old value at beta 1.
  if (w.shared) mlp_rows(x, *w.shared, act, f32_view(res.data(), t_count, d), 1.f, ctx, g, u);
  if (beta != 0.f) {
    const std::vector<float> old = to_f32(out);  // [T, d] contiguous
    for (size_t i = 0; i < res.size(); ++i) res[i] = old[i] + res[i];
  }
  from_f32(res.data(), out);
}

}  // namespace kimi::cpu
