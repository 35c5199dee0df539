// Harness cases for kimi/ops/moe.h against src/verify/oracle/moe.h.
//
// Routing is discontinuous: a token whose biased scores nearly tie at the top-K boundary could be routed
// differently by an fp32 implementation and the fp64 oracle. Inputs are therefore drawn so that the top
// K+1 biased scores of every token are either exactly equal (identical logit and bias: the tie rule
// decides, identically in any precision) or at least kGap apart; routing ids must then match exactly.
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <random>

#include "kimi/ops/moe.h"
#include "verify/oracle/moe.h"
#include "verify/cases/buf.h"
#include "verify/cases/case.h"

namespace kimi::verify {

namespace {
using oracle::Vec;

constexpr double kGap = 1e-5;

// True when the top K+1 biased scores of row i are pairwise >= kGap apart or exactly equal.
bool separated(const Vec& biased, int64_t i, int64_t e, int64_t k) {
  Vec v(biased.begin() + i * e, biased.begin() + (i + 1) * e);
  std::sort(v.begin(), v.end(), std::greater<double>());
  for (int64_t j = 0; j < std::min(k, e - 1); ++j) {
    const double g = v[size_t(j)] - v[size_t(j + 1)];
    if (g != 0 && g < kGap) return false;
  }
  return true;
}

// got ids vs oracle ids as a 0/1 mismatch vector (err = sqrt(#mismatches) against a zero reference).
void compare_ids(Compare& cmp, const Buf& ids, const std::vector<int64_t>& ref) {
  const auto got = ids.to_ints();
  std::vector<double> miss(ref.size(), 0.0);
  for (size_t i = 0; i < ref.size(); ++i) miss[i] = got.size() == ref.size() && got[i] == ref[i] ? 0.0 : 1.0;
  cmp.values("ids", miss, std::vector<double>(ref.size(), 0.0));
  cmp.output("ids (guard bytes)", ids, ids.to_f64());  // err 0; records ids.guards_ok()
}

std::vector<float> rounded_uniform(std::mt19937_64& rng, size_t n, double lo, double hi, DType dt) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = float(round_as(dt, u(rng)));
  return v;
}

// ---------------------------------------------------------------- router
struct RouterCase {
  int64_t t, e, k;
  bool bias, renorm;
  double scaling;
  DType dt;
  int64_t pad = 0;
  bool ties = false;  // logits from a 5-value grid (and bias from a 2-value grid): many exact ties
};

std::string router_str(const RouterCase& c) {
  return "T=" + std::to_string(c.t) + " E=" + std::to_string(c.e) + " K=" + std::to_string(c.k) +
         (c.bias ? " bias" : "") + (c.renorm ? " renorm" : "") + " s=" + std::to_string(c.scaling).substr(0, 5) +
         (c.pad ? " strided" : "") + (c.ties ? " ties" : "");
}

Result run_router(const RouterCase& c, Scale scale, Device dev) {
  std::mt19937_64 rng(11 + c.t * 7 + c.e * 3 + c.k + (c.bias ? 100 : 0) + (c.ties ? 1000 : 0));
  Buf logits(dev, c.dt, {c.t, c.e}, c.pad), ids(dev, DType::i32, {c.t, c.k}), w(dev, DType::f32, {c.t, c.k});
  std::optional<Buf> bias;
  Vec bv;
  std::uniform_int_distribution<int> grid(0, 4), grid2(0, 1);
  if (c.bias) {
    bias.emplace(dev, DType::f32, std::vector<int64_t>{c.e});
    std::vector<float> b = rounded_uniform(rng, size_t(c.e), -0.1, 0.1, DType::f32);
    if (c.ties)
      for (auto& x : b) x = 0.25f * float(grid2(rng));
    bias->set(b);
    bv = bias->to_f64();
  }
  auto draw_row = [&](std::vector<float>& lv, int64_t i) {
    std::uniform_real_distribution<double> u(-4, 4);
    for (int64_t j = 0; j < c.e; ++j)
      lv[size_t(i * c.e + j)] = float(round_as(c.dt, c.ties ? 0.5 * (grid(rng) - 2) : u(rng)));
  };
  std::vector<float> lv(static_cast<size_t>(c.t * c.e));
  for (int64_t i = 0; i < c.t; ++i) draw_row(lv, i);
  for (int pass = 0; pass < 100; ++pass) {
    const Vec l(lv.begin(), lv.end());
    const auto r = oracle::moe_router(l, bv, c.t, c.e, c.k, c.renorm, c.scaling);
    bool ok = true;
    for (int64_t i = 0; i < c.t; ++i)
      if (!separated(r.biased, i, c.e, c.k)) {
        draw_row(lv, i);
        ok = false;
      }
    if (ok) break;
  }
  logits.set(lv);
  const RouterParams p{int(c.k), c.renorm, float(c.scaling)};
  const TensorView bview = bias ? bias->view() : TensorView{};
  const double ms = time_call(scale, dev, [&] { moe_router(logits, bview, p, ids, w); });
  const auto ref = oracle::moe_router(logits.to_f64(), bv, c.t, c.e, c.k, c.renorm, c.scaling);
  Compare cmp;
  compare_ids(cmp, ids, ref.ids);
  cmp.output("weights", w, ref.weights);
  return cmp.result(ms);
}

// ---------------------------------------------------------------- quantile balance
struct QbCase {
  int64_t t, e, k;
};

// Skewed scores: sigmoid(N(mu_j, 1)) with expert means spread over [-1.5, 1.5].
std::vector<float> skewed_scores(std::mt19937_64& rng, int64_t t, int64_t e) {
  std::normal_distribution<double> n(0, 1);
  std::vector<float> s(static_cast<size_t>(t * e));
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = 0; j < e; ++j) {
      const double mu = -1.5 + 3.0 * double(j) / double(std::max<int64_t>(e - 1, 1));
      s[size_t(i * e + j)] = float(1.0 / (1.0 + std::exp(-(mu + n(rng)))));
    }
  return s;
}

Result run_qb(const QbCase& c, Scale scale, Device dev) {
  std::mt19937_64 rng(21 + c.t * 5 + c.e + c.k);
  Buf scores(dev, DType::f32, {c.t, c.e}), bias(dev, DType::f32, {c.e});
  scores.set(skewed_scores(rng, c.t, c.e));
  bias.uniform(rng, -0.05, 0.05);
  const Vec s = scores.to_f64(), b0 = bias.to_f64();
  // time_call runs the in-place update several times at check scale: restore the bias before each.
  const double ms = time_call(scale, dev, [&] {
    bias.set(b0);
    moe_quantile_balance(scores, bias, int(c.k));
  });
  Compare cmp;
  cmp.output("bias", bias, oracle::moe_quantile_balance(s, b0, c.t, c.e, c.k));
  return cmp.result(ms);
}

// ---------------------------------------------------------------- glu
struct GluCase {
  std::vector<int64_t> shape;
  bool situ;
  DType dt;
  int64_t pad = 0;
  double range = 8;  // gate in +-range, up in +-(range * 4)
  float lbeta = 25.f;
};

Result run_glu(const GluCase& c, Scale scale, Device dev) {
  std::mt19937_64 rng(31 + c.shape.back() * 3 + (c.situ ? 1 : 0) + int64_t(c.range));
  Buf g(dev, c.dt, c.shape, c.pad), u(dev, c.dt, c.shape), h(dev, c.dt, c.shape, c.pad);
  g.uniform(rng, -c.range, c.range);
  u.uniform(rng, -4 * c.range, 4 * c.range);
  if (c.range >= 1e4) {  // also the exact extremes
    auto gv = g.to_f32(), uv = u.to_f32();
    gv[0] = 1e4f;
    uv[0] = -1e4f;
    if (gv.size() > 1) gv[1] = -1e4f, uv[1] = 1e4f;
    g.set(gv);
    u.set(uv);
  }
  GluParams p;
  p.act = c.situ ? GluAct::situ : GluAct::silu;
  p.situ_linear_beta = c.lbeta;
  const double ms = time_call(scale, dev, [&] { glu(g, u, p, h); });
  const Vec gv = g.to_f64(), uv = u.to_f64();
  const oracle::Act a{c.situ, 4.0, double(c.lbeta)};
  Vec ref(gv.size());
  for (size_t i = 0; i < ref.size(); ++i) ref[i] = oracle::glu(gv[i], uv[i], a);
  Compare cmp;
  cmp.output("h", h, ref);
  return cmp.result(ms);
}

// ---------------------------------------------------------------- weights
// A weight matrix kind stored as one buffer ("pool") of which each expert takes a window of `out`
// rows starting at row shift * e. shift = out gives disjoint experts; a smaller shift gives distinct
// but overlapping experts (real per-expert shapes at a fraction of the memory, for Scale::check).
// NOTE: Bufs are held by unique_ptr: Buf's defaulted move copies its raw allocation pointer, so a
// moved-from Buf would free the same memory again.
struct PoolW {
  std::unique_ptr<Buf> w;
  std::unique_ptr<Buf> scale;  // MXFP4
  int64_t out, in, shift;
  Vec dense;  // fp64 decode of the whole pool (oracle side)

  Weight at(int64_t e) const {
    Weight r;
    r.w = w->view().slice(0, shift * e, shift * e + out);
    if (scale) r.scale = scale->view().slice(0, shift * e, shift * e + out);
    return r;
  }
  Vec dense_at(int64_t e) const {
    return Vec(dense.begin() + shift * e * in, dense.begin() + (shift * e + out) * in);
  }
};

// Dense [out, in] with variance 1/in (uniform), or MXFP4 with random codes and E8M0 scales near
// 1/(2.93 sqrt(in)) (2.93 = RMS of the E2M1 magnitudes), decoded by the oracle's own decoder.
PoolW make_weight(Device dev, std::mt19937_64& rng, int64_t out, int64_t in, int64_t count, int64_t shift, bool mxfp4,
                  DType dt) {
  const int64_t rows = out + shift * (count - 1);
  if (!mxfp4) {
    PoolW p{std::make_unique<Buf>(dev, dt, std::vector<int64_t>{rows, in}), nullptr, out, in, shift, {}};
    const double a = std::sqrt(3.0 / double(in));
    p.w->uniform(rng, -a, a);
    p.dense = p.w->to_f64();
    return p;
  }
  PoolW p{std::make_unique<Buf>(dev, DType::u8, std::vector<int64_t>{rows, in / 2}),
          std::make_unique<Buf>(dev, DType::u8, std::vector<int64_t>{rows, in / 32}), out, in, shift, {}};
  std::uniform_int_distribution<int> byte(0, 255), jitter(-1, 1);
  const int e0 = 127 + int(std::lround(std::log2(1.0 / (2.93 * std::sqrt(double(in))))));
  std::vector<int64_t> codes(static_cast<size_t>(rows * in / 2)), scales(static_cast<size_t>(rows * in / 32));
  for (auto& v : codes) v = byte(rng);
  for (auto& v : scales) v = e0 + jitter(rng);
  p.w->set_ints(codes);
  p.scale->set_ints(scales);
  std::vector<uint8_t> cb(codes.begin(), codes.end()), sb(scales.begin(), scales.end());
  p.dense = oracle::mxfp4_decode(cb, sb, rows, in);
  return p;
}

struct MlpPools {
  PoolW gate, up, down;
  MlpWeights at(int64_t e) const { return {gate.at(e), up.at(e), down.at(e)}; }
  oracle::Mlp dense_at(int64_t e) const { return {gate.dense_at(e), up.dense_at(e), down.dense_at(e), gate.out}; }
};

// count experts of [I, d] / [I, d] / [d, I]; shift 0 = disjoint.
MlpPools make_mlp(Device dev, std::mt19937_64& rng, int64_t d, int64_t inter, int64_t count, int64_t shift, bool mxfp4,
                  DType dt) {
  return {make_weight(dev, rng, inter, d, count, shift ? shift : inter, mxfp4, dt),
          make_weight(dev, rng, inter, d, count, shift ? shift : inter, mxfp4, dt),
          make_weight(dev, rng, d, inter, count, shift ? shift : d, mxfp4, dt)};
}

// ---------------------------------------------------------------- mlp
struct MlpCase {
  int64_t t, d, inter;
  bool situ, mxfp4;
  DType dt;  // x and y (weights bf16 when dense)
  float beta = 0.f;
  int64_t pad = 0;
};

std::string mlp_str(const MlpCase& c) {
  return "T=" + std::to_string(c.t) + " d=" + std::to_string(c.d) + " I=" + std::to_string(c.inter) +
         (c.situ ? " situ" : " silu") + (c.mxfp4 ? " mxfp4" : " bf16-w") + (c.beta != 0.f ? " beta=1" : "") +
         (c.pad ? " strided" : "");
}

Result run_mlp(const MlpCase& c, Scale scale, Device dev) {
  std::mt19937_64 rng(41 + c.t * 3 + c.d + c.inter + (c.mxfp4 ? 7 : 0) + (c.situ ? 1 : 0));
  const MlpPools w = make_mlp(dev, rng, c.d, c.inter, 1, 0, c.mxfp4, DType::bf16);
  Buf x(dev, c.dt, {c.t, c.d}, c.pad), y(dev, c.dt, {c.t, c.d}, c.pad);
  x.uniform(rng, -1, 1);
  y.uniform(rng, -1, 1);
  const Vec y0 = y.to_f64();
  GluParams p;
  p.act = c.situ ? GluAct::situ : GluAct::silu;
  const MlpWeights mw = w.at(0);
  const double ms = time_call(scale, dev, [&] {
    if (c.beta != 0.f) y.set(y0);
    mlp(x, mw, p, y, c.beta);
  });
  Vec ref = oracle::mlp(x.to_f64(), w.dense_at(0), c.t, c.d, oracle::Act{c.situ, 4, 25});
  if (c.beta != 0.f)
    for (size_t i = 0; i < ref.size(); ++i) ref[i] += y0[i];
  Compare cmp;
  cmp.output("y", y, ref);
  return cmp.result(ms);
}

// ---------------------------------------------------------------- latent moe
struct MoeCase {
  std::string name;
  int64_t t, d, e, k, latent, inter, shared_inter;  // latent / shared_inter 0: absent
  bool situ, mxfp4;
  double scaling;
  DType dt;
  int64_t shift = 0;  // expert pool shift (0: disjoint experts)
  int64_t hot = -1;   // an expert whose router bias is raised by 2: first choice of every token (K = 1: all rows)
};

std::string moe_str(const MoeCase& c) {
  return c.name + " T=" + std::to_string(c.t) + " d=" + std::to_string(c.d) + " E=" + std::to_string(c.e) +
         " K=" + std::to_string(c.k) + (c.latent ? " Dl=" + std::to_string(c.latent) : "") +
         " I=" + std::to_string(c.inter) + (c.hot >= 0 ? " hot=" + std::to_string(c.hot) : "");
}

Result run_moe(const MoeCase& c, Scale scale, Device dev) {
  std::mt19937_64 rng(51 + c.t * 3 + c.d + c.e + c.k + c.latent);
  const int64_t dl = c.latent ? c.latent : c.d;
  const PoolW router = make_weight(dev, rng, c.e, c.d, 1, c.e, false, DType::bf16);
  Buf bias(dev, DType::f32, {c.e});
  bias.uniform(rng, -0.05, 0.05);
  if (c.hot >= 0) {  // sigmoid scores lie in (0, 1): s_hot + 2 - 0.05 beats every other s + b < 1.05
    Vec b = bias.to_f64();
    b[size_t(c.hot)] += 2.0;
    bias.set(b);
  }
  std::optional<PoolW> down, up;
  std::optional<Buf> norm;
  if (c.latent) {
    down.emplace(make_weight(dev, rng, dl, c.d, 1, dl, false, DType::bf16));
    up.emplace(make_weight(dev, rng, c.d, dl, 1, c.d, false, DType::bf16));
    norm.emplace(dev, DType::bf16, std::vector<int64_t>{dl});
    norm->uniform(rng, 0.5, 1.5);
  }
  const MlpPools experts = make_mlp(dev, rng, dl, c.inter, c.e, c.shift, c.mxfp4, DType::bf16);
  std::optional<MlpPools> shared;
  if (c.shared_inter) shared.emplace(make_mlp(dev, rng, c.d, c.shared_inter, 1, 0, false, DType::bf16));

  oracle::MoeWeights ow;
  ow.router = router.dense;
  ow.router_bias = bias.to_f64();
  if (c.latent) {
    ow.latent_down = down->dense;
    ow.latent_up = up->dense;
    ow.latent_norm = norm->to_f64();
    ow.latent = dl;
  }
  ow.num_experts = c.e;
  ow.expert = [&](int64_t e) { return experts.dense_at(e); };
  oracle::Mlp osh;
  if (shared) {
    osh = shared->dense_at(0);
    ow.shared = &osh;
  }

  // x with well-separated routing (redraw rows whose top-K+1 biased scores nearly tie).
  Buf x(dev, c.dt, {c.t, c.d}), out(dev, c.dt, {c.t, c.d}), ids(dev, DType::i32, {c.t, c.k}),
      wts(dev, DType::f32, {c.t, c.k});
  std::vector<float> xv = rounded_uniform(rng, size_t(c.t * c.d), -1, 1, c.dt);
  for (int pass = 0; pass < 100; ++pass) {
    const Vec xd(xv.begin(), xv.end());
    const auto r = oracle::moe_router(oracle::matmul(xd, ow.router, c.t, c.d, c.e), ow.router_bias, c.t, c.e, c.k,
                                      true, 1.0);
    bool ok = true;
    for (int64_t i = 0; i < c.t; ++i)
      if (!separated(r.biased, i, c.e, c.k)) {
        const auto row = rounded_uniform(rng, size_t(c.d), -1, 1, c.dt);
        std::copy(row.begin(), row.end(), xv.begin() + i * c.d);
        ok = false;
      }
    if (ok) break;
  }
  x.set(xv);

  std::vector<MlpWeights> ew;
  for (int64_t e = 0; e < c.e; ++e) ew.push_back(experts.at(e));
  const MlpWeights sw = shared ? shared->at(0) : MlpWeights{};
  LatentMoeWeights w;
  w.router = router.at(0);
  w.router_bias = bias;
  if (c.latent) {
    w.latent_down = down->at(0);
    w.latent_up = up->at(0);
    w.latent_norm = *norm;
  }
  w.experts = ew;
  w.shared = shared ? &sw : nullptr;
  const RouterParams rp{int(c.k), true, float(c.scaling)};
  GluParams act;
  act.act = c.situ ? GluAct::situ : GluAct::silu;
  const float eps = 1e-5f;
  const double ms = time_call(scale, dev, [&] { latent_moe(x, w, rp, act, eps, out, ids, wts); });
  const auto ref = oracle::latent_moe(x.to_f64(), ow, c.t, c.d, c.k, true, c.scaling,
                                      oracle::Act{c.situ, 4, 25}, eps);
  Compare cmp;
  compare_ids(cmp, ids, ref.routing.ids);
  cmp.output("weights", wts, ref.routing.weights);
  cmp.output("out", out, ref.out);
  return cmp.result(ms);
}
}  // namespace

void add_moe_cases(CaseList& list, Scale scale) {
  // Router: routing weights are f32 outputs of fp32 compute on dtype-rounded logits: f32 bound.
  std::vector<RouterCase> routers;
  if (scale == Scale::test) {
    routers = {{7, 16, 4, true, true, 1.0, DType::f32},       {33, 16, 4, false, false, 2.446, DType::f32},
               {9, 16, 4, true, true, 2.446, DType::bf16, 3}, {5, 64, 8, true, false, 1.0, DType::f16},
               {16, 16, 4, false, true, 1.0, DType::bf16, 0, true}, {16, 16, 4, true, true, 2.446, DType::bf16, 0, true},
               {3, 8, 8, true, true, 1.0, DType::f32},         {4, 1, 1, false, true, 1.0, DType::f32},
               // the CUDA kernel's register tiers (E <= 256, 512, 1024: Kimi-Linear, K3) and its general path
               // (E > 1024 or k > 32), with ties
               {3, 256, 8, true, true, 2.446, DType::bf16, 0, true}, {6, 300, 8, true, true, 1.0, DType::f32},
               {2, 896, 16, true, true, 2.446, DType::f32},      {5, 896, 16, true, true, 2.446, DType::bf16, 0, true},
               {2, 1100, 4, true, true, 1.0, DType::f32},        {3, 64, 40, true, true, 1.0, DType::f32}};
  } else {
    routers = {{512, 256, 8, true, true, 2.446, DType::f32}, {512, 256, 8, false, false, 2.446, DType::bf16},
               {512, 16, 4, true, true, 1.0, DType::bf16},      {1, 256, 8, true, true, 2.446, DType::f32},
               {1, 896, 16, true, true, 2.446, DType::f32},     {4096, 896, 16, true, true, 2.446, DType::f32}};
  }
  for (const RouterCase& c : routers)
    list.push_back({"moe_router", router_str(c), c.dt, tol_for(DType::f32),
                    [=](Device dev) { return run_router(c, scale, dev); }});

  std::vector<QbCase> qbs;
  if (scale == Scale::test) {
    qbs = {{64, 16, 4}, {37, 16, 4}, {5, 16, 4}, {3, 16, 1}, {20, 2, 1}};
  } else {
    qbs = {{4096, 256, 8}, {4096, 64, 8}};
  }
  for (const QbCase& c : qbs)
    list.push_back({"moe_quantile_balance",
                    "T=" + std::to_string(c.t) + " E=" + std::to_string(c.e) + " K=" + std::to_string(c.k), DType::f32,
                    tol_for(DType::f32), [=](Device dev) { return run_qb(c, scale, dev); }});

  std::vector<GluCase> glus;
  for (bool situ : {false, true})
    for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
      if (scale == Scale::test) {
        glus.push_back({{5, 64}, situ, dt});
        glus.push_back({{3, 7, 33}, situ, dt});
        glus.push_back({{6, 48}, situ, dt, 5});
        if (situ || dt != DType::f16) glus.push_back({{4, 40}, situ, dt, 0, 1e4});  // extreme inputs
      } else if (dt != DType::f16) {
        glus.push_back({{512, 1024}, situ, dt});
      }
    }
  if (scale == Scale::test) glus.push_back({{4, 40}, true, DType::f32, 0, 30, 0.f});  // identity on up
  for (const GluCase& c : glus) {
    std::string s = "[";
    for (size_t i = 0; i < c.shape.size(); ++i) s += (i ? ", " : "") + std::to_string(c.shape[i]);
    s += std::string("] ") + (c.situ ? "situ" : "silu") + (c.pad ? " strided" : "") +
         (c.range >= 1e4 ? " extreme" : "") + (c.lbeta <= 0 ? " lbeta=0" : "");
    list.push_back({"glu", s, c.dt, tol_for(c.dt), [=](Device dev) { return run_glu(c, scale, dev); }});
  }

  std::vector<MlpCase> mlps;
  if (scale == Scale::test) {
    mlps = {{7, 64, 96, true, false, DType::bf16},  {7, 64, 96, true, false, DType::f32},
            {5, 64, 96, true, true, DType::f32},    {5, 64, 96, false, true, DType::bf16},
            {6, 96, 64, false, false, DType::f32, 1.f}, {4, 64, 32, true, true, DType::f32, 0.f, 3},
            {1, 64, 96, true, true, DType::f32},
            // above the CUDA GEMV bound (16 rows): cuBLAS with f32 activations times bf16 / MXFP4 weights
            {40, 64, 96, true, false, DType::f32}, {33, 64, 96, false, true, DType::f32, 1.f, 2},
            {20, 64, 32, true, false, DType::bf16}};
  } else {
    mlps = {{64, 2304, 1024, false, false, DType::bf16}, {16, 3584, 3072, true, true, DType::bf16}};
  }
  for (const MlpCase& c : mlps)
    list.push_back({"mlp", mlp_str(c), c.dt, tol_for(c.dt), [=](Device dev) { return run_mlp(c, scale, dev); }});

  std::vector<MoeCase> moes;
  if (scale == Scale::test) {
    // k3-tiny: latent 128 + RMSNorm, SiTU, MXFP4 experts, 2 shared x 64; kimi-linear-tiny: no latent,
    // SiLU, dense bf16 experts, scaling 2.446 (SPEC 13).
    for (int64_t t : {7, 1}) {
      moes.push_back({"k3-tiny", t, 256, 16, 4, 128, 64, 128, true, true, 1.0, DType::bf16});
      moes.push_back({"kimi-linear-tiny", t, 256, 16, 4, 0, 64, 128, false, false, 2.446, DType::bf16});
    }
    moes.push_back({"k3-tiny", 9, 256, 16, 4, 128, 64, 128, true, true, 1.0, DType::f32});
    moes.push_back({"kimi-linear-tiny", 9, 256, 16, 4, 0, 64, 128, false, false, 2.446, DType::f32});
    moes.push_back({"no-shared", 5, 64, 8, 8, 32, 32, 0, true, false, 1.0, DType::f32});
    // 40 tokens x top-4 over 8 experts: experts with more than 16 rows (the CUDA GEMM path per expert)
    moes.push_back({"k3-tiny", 40, 256, 8, 4, 128, 64, 128, true, true, 1.0, DType::f32});
    moes.push_back({"kimi-linear-tiny", 40, 256, 8, 4, 0, 64, 0, false, false, 2.446, DType::bf16});
    // CUDA's grouped decode path (T * K <= 16 E: no host sync) at decode batch sizes, ragged counts and empty
    // experts; experts with more than 8 rows (the kernels' row groups loop) at T = 32 and 128.
    moes.push_back({"k3-tiny", 4, 256, 16, 4, 128, 64, 128, true, true, 1.0, DType::f32});
    moes.push_back({"kimi-linear-tiny", 4, 256, 16, 4, 0, 64, 128, false, false, 2.446, DType::bf16});
    moes.push_back({"k3-tiny", 32, 256, 16, 4, 128, 64, 128, true, true, 1.0, DType::bf16});
    moes.push_back({"kimi-linear-tiny", 32, 256, 16, 4, 0, 64, 128, false, false, 2.446, DType::f32});
    moes.push_back({"k3-tiny", 128, 256, 32, 4, 128, 64, 0, true, true, 1.0, DType::f32});
    moes.push_back({"kimi-linear-tiny", 128, 256, 64, 4, 0, 64, 128, false, false, 2.446, DType::bf16});
    // SiLU on MXFP4 experts and SiTU on bf16 experts
    moes.push_back({"mxfp4-silu", 9, 128, 16, 4, 0, 64, 0, false, true, 1.0, DType::f32});
    moes.push_back({"bf16-situ", 9, 128, 16, 4, 64, 96, 0, true, false, 1.0, DType::f32});
    // all tokens on one expert (K = 1), every other expert empty: grouped (T = 32 and 128: 4 and 16 row groups
    // of 8 on one expert) and prefill (T = 256 over E = 8) paths
    moes.push_back({"k3-tiny", 32, 256, 8, 1, 128, 64, 128, true, true, 1.0, DType::f32, 0, 5});
    moes.push_back({"kimi-linear-tiny", 128, 256, 8, 1, 0, 64, 0, false, false, 2.446, DType::bf16, 0, 2});
    moes.push_back({"kimi-linear-tiny", 256, 256, 8, 1, 0, 64, 0, false, false, 2.446, DType::f32, 0, 7});
    // prefill path (T * K > 16 E): one counts copy, cuBLAS on bf16 operands for bf16 x
    moes.push_back({"k3-tiny", 256, 256, 16, 4, 128, 64, 128, true, true, 1.0, DType::bf16});
    moes.push_back({"kimi-linear-tiny", 256, 256, 16, 4, 0, 64, 128, false, false, 2.446, DType::bf16});
    moes.push_back({"k3-tiny", 256, 256, 16, 4, 128, 64, 128, true, true, 1.0, DType::f32});
  } else {
    // Kimi-Linear-48B shapes with 64 of the 256 experts (distinct, overlapping windows of one pool).
    moes.push_back({"kimi-linear", 64, 2304, 64, 8, 0, 1024, 1024, false, false, 2.446, DType::bf16, 8});
    moes.push_back({"kimi-linear", 1, 2304, 64, 8, 0, 1024, 1024, false, false, 2.446, DType::bf16, 8});
    moes.push_back({"kimi-linear", 32, 2304, 64, 8, 0, 1024, 1024, false, false, 2.446, DType::bf16, 8});
    moes.push_back({"kimi-linear", 512, 2304, 64, 8, 0, 1024, 1024, false, false, 2.446, DType::bf16, 8});
    // decode batch 32 over all 256 experts (~1.6 rows per touched expert)
    moes.push_back({"kimi-linear", 32, 2304, 256, 8, 0, 1024, 1024, false, false, 2.446, DType::bf16, 8});
    // K3's latent MoE widths (d 7168, latent 3584 + norm, I 3072, MXFP4, SiTU, top-16, 2 shared) over 32 experts
    moes.push_back({"k3", 4, 7168, 32, 16, 3584, 3072, 6144, true, true, 1.0, DType::bf16, 64});
  }
  for (const MoeCase& c : moes)
    list.push_back({"latent_moe", moe_str(c), c.dt, tol_for(c.dt), [=](Device dev) { return run_moe(c, scale, dev); }});
}

}  // namespace kimi::verify
