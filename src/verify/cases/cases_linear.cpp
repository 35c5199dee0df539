// Harness cases for kimi/ops/linear.h against src/verify/oracle/linear.h (and the fp64 MXFP4 decode of
// src/verify/oracle/mxfp4.h for MXFP4 weights).
#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kimi/ops/linear.h"
#include "verify/oracle/linear.h"
#include "verify/oracle/mxfp4.h"
#include "verify/cases/buf.h"
#include "verify/cases/case.h"

namespace kimi::verify {

namespace {
struct Shape {
  int64_t m, n, k;  // y [m, n] = x [m, k] W^T, W [n, k]
  int64_t pad;      // row padding of x, y and W (strided views) when > 0
  bool mxfp4;       // MXFP4 weights (k % 32 == 0) instead of dense dt
  float beta;
  bool bf16_w = false;  // dense weights stored bf16 whatever dt (f32 / f16 activations times bf16 weights)
};

std::string shape_str(const Shape& s) {
  return "M=" + std::to_string(s.m) + " N=" + std::to_string(s.n) + " K=" + std::to_string(s.k) +
         (s.mxfp4 ? " mxfp4" : " dense") + (s.pad ? " strided" : "") + (s.beta != 0.f ? " beta=1" : "") + (s.bf16_w ? " bf16-w" : "");
}

Result run_linear(const Shape& s, DType dt, Scale scale, Device dev) {
  std::mt19937_64 rng(7 + s.m * 1009 + s.n * 31 + s.k + (s.mxfp4 ? 5 : 0) + int64_t(s.beta));
  Buf x(dev, dt, {s.m, s.k}, s.pad), y(dev, dt, {s.m, s.n}, s.pad);
  x.uniform(rng, -1, 1);
  if (s.beta != 0.f) y.uniform(rng, -1, 1);
  std::vector<double> wref;
  std::optional<Buf> wd, packed, sc;
  Weight w;
  if (s.mxfp4) {
    packed.emplace(dev, DType::u8, std::vector<int64_t>{s.n, s.k / 2}, s.pad);
    sc.emplace(dev, DType::u8, std::vector<int64_t>{s.n, s.k / 32}, s.pad);
    std::uniform_int_distribution<int64_t> byte(0, 255), expo(118, 124);  // |w| up to 6 * 2^-3
    std::vector<int64_t> pv(static_cast<size_t>(s.n * s.k / 2)), sv(static_cast<size_t>(s.n * s.k / 32));
    for (auto& v : pv) v = byte(rng);
    for (auto& v : sv) v = expo(rng);
    packed->set_ints(pv);
    sc->set_ints(sv);
    std::vector<uint8_t> pb(pv.begin(), pv.end());
    wref = oracle::mxfp4_decode(oracle::unpack_codes(pb, s.n, s.k), std::vector<int>(sv.begin(), sv.end()), s.n, s.k);
    w = Weight{packed->view(), sc->view()};
  } else {
    wd.emplace(dev, s.bf16_w ? DType::bf16 : dt, std::vector<int64_t>{s.n, s.k}, s.pad);
    const double a = std::sqrt(3.0 / double(std::max<int64_t>(s.k, 1)));  // unit-variance outputs
    wd->uniform(rng, -a, a);
    wref = wd->to_f64();
    w = Weight{wd->view(), {}};
  }
  const std::vector<double> y0 = y.to_f64();
  const std::vector<double> xs = x.to_f64();
  // Scale::check times several calls: with beta = 1 each would accumulate, so time on a copy.
  double ms = 0;
  if (s.beta != 0.f && scale == Scale::check) {
    Buf yt(dev, dt, {s.m, s.n}, s.pad);
    ms = time_call(scale, dev, [&] { linear(x, w, yt, 0.f); });
    linear(x, w, y, s.beta);
  } else {
    ms = time_call(scale, dev, [&] { linear(x, w, y, s.beta); });
  }
  Compare cmp;
  cmp.output("y", y, oracle::linear(xs, wref, s.beta != 0.f ? &y0 : nullptr, s.m, s.n, s.k));
  return cmp.result(ms);
}
// linear_many: the jobs (shapes sharing M) in one call, each y against the oracle.
Result run_linear_many(const std::vector<Shape>& jobs_s, DType dt, Device dev) {
  std::mt19937_64 rng(11 + jobs_s.size() * 13 + jobs_s[0].m);
  std::vector<std::optional<Buf>> xs(jobs_s.size()), ys(jobs_s.size()), ws(jobs_s.size()), ss(jobs_s.size());
  std::vector<std::vector<double>> wref(jobs_s.size()), y0(jobs_s.size());
  std::vector<LinearJob> jobs;
  for (size_t i = 0; i < jobs_s.size(); ++i) {
    const Shape& s = jobs_s[i];
    xs[i].emplace(dev, dt, std::vector<int64_t>{s.m, s.k}, s.pad);
    ys[i].emplace(dev, dt, std::vector<int64_t>{s.m, s.n}, s.pad);
    xs[i]->uniform(rng, -1, 1);
    if (s.beta != 0.f) ys[i]->uniform(rng, -1, 1);
    Weight w;
    if (s.mxfp4) {
      ws[i].emplace(dev, DType::u8, std::vector<int64_t>{s.n, s.k / 2}, s.pad);
      ss[i].emplace(dev, DType::u8, std::vector<int64_t>{s.n, s.k / 32}, s.pad);
      std::uniform_int_distribution<int64_t> byte(0, 255), expo(118, 124);
      std::vector<int64_t> pv(static_cast<size_t>(s.n * s.k / 2)), sv(static_cast<size_t>(s.n * s.k / 32));
      for (auto& v : pv) v = byte(rng);
      for (auto& v : sv) v = expo(rng);
      ws[i]->set_ints(pv);
      ss[i]->set_ints(sv);
      std::vector<uint8_t> pb(pv.begin(), pv.end());
      wref[i] = oracle::mxfp4_decode(oracle::unpack_codes(pb, s.n, s.k), std::vector<int>(sv.begin(), sv.end()), s.n,
                                     s.k);
      w = Weight{ws[i]->view(), ss[i]->view()};
    } else {
      ws[i].emplace(dev, s.bf16_w ? DType::bf16 : dt, std::vector<int64_t>{s.n, s.k}, s.pad);
      const double a = std::sqrt(3.0 / double(std::max<int64_t>(s.k, 1)));
      ws[i]->uniform(rng, -a, a);
      wref[i] = ws[i]->to_f64();
      w = Weight{ws[i]->view(), {}};
    }
    y0[i] = ys[i]->to_f64();
    jobs.push_back({xs[i]->view(), w, ys[i]->view(), s.beta});
  }
  // One call, timed at the test scale's single run (the beta = 1 jobs must accumulate once).
  const double ms = time_call(Scale::test, dev, [&] { linear_many(jobs); });
  Compare cmp;
  for (size_t i = 0; i < jobs_s.size(); ++i) {
    const Shape& s = jobs_s[i];
    cmp.output("y[" + std::to_string(i) + "]", *ys[i],
               oracle::linear(xs[i]->to_f64(), wref[i], s.beta != 0.f ? &y0[i] : nullptr, s.m, s.n, s.k));
  }
  return cmp.result(ms);
}

}  // namespace

void add_linear_cases(CaseList& list, Scale scale) {
  std::vector<Shape> shapes;
  if (scale == Scale::test) {
    shapes = {
        {1, 1, 1, 0, false, 0.f},     {1, 7, 33, 0, false, 0.f},    {3, 17, 65, 3, false, 0.f},
        {5, 300, 64, 0, false, 0.f},  {1, 259, 96, 2, false, 0.f},  {17, 31, 129, 0, false, 1.f},
        {1, 40, 50, 0, false, 1.f},   {4, 23, 2304, 0, false, 0.f}, {1, 9, 64, 0, true, 0.f},
        {3, 260, 96, 5, true, 0.f},   {7, 33, 128, 0, true, 1.f},   {1, 270, 2304, 0, true, 1.f},
        {33, 65, 64, 1, true, 0.f},   {2, 5, 32, 0, true, 0.f},
        // M at the CUDA GEMV / GEMM boundary (16 / 17) and above it: cuBLAS, the split-x bf16 GEMMs, panels
        {16, 37, 100, 1, false, 1.f}, {9, 70, 256, 0, true, 0.f},   {64, 45, 96, 2, false, 1.f},
        {70, 33, 64, 0, true, 1.f},   {65, 130, 160, 3, true, 0.f},
        {3, 45, 96, 0, false, 1.f, true}, {17, 45, 96, 1, false, 0.f, true}, {64, 33, 200, 0, false, 1.f, true},
        // bf16: the CUDA tensor-core GEMV (K % 8 == 0, 16-byte aligned rows): 16-row tile tails, K tails inside a
        // 32-column step, one or two 8-token blocks, padded rows, beta 1
        {8, 45, 264, 8, false, 1.f},  {16, 130, 512, 0, false, 0.f}, {9, 17, 40, 0, false, 0.f},
        {2, 1, 32, 0, false, 1.f},    {12, 300, 96, 16, false, 0.f}, {1, 33, 2056, 8, false, 1.f},
    };
  } else {  // Kimi-Linear (d = 2304): q/k/v-like projections, MLP halves, an expert; decode and prefill
    shapes = {
        {1, 4096, 2304, 0, false, 0.f}, {64, 4096, 2304, 0, false, 0.f}, {64, 2304, 4096, 0, false, 1.f},
        {1, 1024, 2304, 0, true, 0.f},  {64, 1024, 2304, 0, true, 0.f},  {64, 2304, 1024, 0, true, 1.f},
    };
  }
  for (const Shape& s : shapes) {
    for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
      if (scale == Scale::check && dt == DType::f16) continue;
      list.push_back({"linear", shape_str(s), dt, tol_for(dt),
                      [=](Device dev) { return run_linear(s, dt, scale, dev); }});
    }
  }
  // linear_many: a block's projections of one input (KDA-like: wide, narrow, MXFP4, strided, beta 1) at decode and
  // prefill M, more jobs than one CUDA launch holds at M = 1.
  std::vector<std::vector<Shape>> groups;
  const auto block = [](int64_t m) {
    return std::vector<Shape>{{m, 300, 256, 0, false, 0.f}, {m, 64, 256, 2, false, 0.f}, {m, 96, 256, 0, true, 0.f},
                              {m, 33, 37, 1, false, 0.f},   {m, 40, 256, 0, false, 1.f}, {m, 8, 256, 0, false, 0.f, true}};
  };
  if (scale == Scale::test) {
    for (int64_t m : {1, 3, 20}) groups.push_back(block(m));
    std::vector<Shape> many = block(1), more = block(1);
    many.insert(many.end(), more.begin(), more.end());  // 12 jobs
    groups.push_back(many);
  } else {  // Kimi-Linear's KDA input projections: q, k, v, f_a, b, g_a
    for (int64_t m : {1, 64})
      groups.push_back({{m, 4096, 2304, 0, false, 0.f}, {m, 4096, 2304, 0, false, 0.f}, {m, 4096, 2304, 0, false, 0.f},
                        {m, 128, 2304, 0, false, 0.f},  {m, 32, 2304, 0, false, 0.f},   {m, 128, 2304, 0, false, 0.f}});
  }
  for (const std::vector<Shape>& g : groups) {
    for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
      if (scale == Scale::check && dt == DType::f16) continue;
      list.push_back({"linear_many", std::to_string(g.size()) + " jobs M=" + std::to_string(g[0].m), dt, tol_for(dt),
                      [=](Device dev) { return run_linear_many(g, dt, dev); }});
    }
  }
}

}  // namespace kimi::verify
