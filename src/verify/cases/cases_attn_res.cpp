// Harness cases for kimi/ops/attn_res.h against src/verify/oracle/attn_res.h.
#include <random>

#include "kimi/ops/attn_res.h"
#include "verify/oracle/attn_res.h"
#include "verify/cases/buf.h"
#include "verify/cases/case.h"

namespace kimi::verify {

namespace {
struct Shape {
  int64_t T, d, n;  // n blocks (n + 1 candidates)
  int64_t pad;      // row padding of partial and the blocks (strided views)
  double mag;       // candidate magnitude (100: large values, large RMS)
  double proj;      // proj_w in [-proj, proj): larger means sharper softmax scores
  bool out_f32;     // out in f32 whatever the input dtype
};

std::string shape_str(const Shape& s) {
  std::string r = "T=" + std::to_string(s.T) + " d=" + std::to_string(s.d) + " n=" + std::to_string(s.n);
  if (s.pad) r += " strided";
  if (s.mag != 1) r += " x" + std::to_string(int(s.mag));
  if (s.proj != 1) r += " proj=" + std::to_string(int(s.proj));
  if (s.out_f32) r += " out=f32";
  return r;
}
}  // namespace

void add_attn_res_cases(CaseList& list, Scale scale) {
  std::vector<Shape> shapes;
  if (scale == Scale::test) {
    shapes = {{5, 7, 0, 0, 1, 1, false},    {3, 7, 1, 0, 1, 1, false},     {9, 64, 3, 3, 1, 1, false},
              {4, 64, 8, 0, 1, 1, false},   {2, 2304, 8, 0, 1, 1, false},  {6, 64, 8, 2, 100, 4, false},
              {3, 2304, 3, 0, 100, 1, true}, {1, 1, 2, 0, 1, 1, false},    {7, 7, 8, 1, 1, 1, true}};
  } else {
    // Kimi-Linear hidden 2304 (prefill chunk of 512) and K3 hidden 7168; 8 blocks = K3's 9 candidates.
    shapes = {{512, 2304, 8, 0, 1, 1, false}, {64, 7168, 8, 0, 1, 1, false}, {512, 2304, 8, 0, 100, 2, false}};
  }
  for (const Shape& s : shapes) {
    for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
      if (scale == Scale::check && dt == DType::f16) continue;
      const DType odt = s.out_f32 ? DType::f32 : dt;
      list.push_back({"attn_res", shape_str(s), dt, tol_for(odt), [=](Device dev) {
                        std::mt19937_64 rng(5 + uint64_t(s.T) * 131 + uint64_t(s.d) * 7 + uint64_t(s.n));
                        Buf partial(dev, dt, {s.T, s.d}, s.pad), pw(dev, dt, {s.d}), nw(dev, dt, {s.d});
                        Buf out(dev, odt, {s.T, s.d});
                        partial.uniform(rng, -s.mag, s.mag);
                        pw.uniform(rng, -s.proj, s.proj);
                        nw.uniform(rng, 0.5, 1.5);
                        std::vector<Buf> blocks;  // reserved: Buf must not be moved (see report)
                        blocks.reserve(size_t(s.n));
                        std::vector<TensorView> views;
                        std::vector<std::vector<double>> ref_blocks;
                        for (int64_t i = 0; i < s.n; ++i) {
                          const double m = s.mag * (1.0 + 0.5 * double(i));  // block sums grow with depth
                          blocks.emplace_back(dev, dt, std::vector<int64_t>{s.T, s.d}, s.pad).uniform(rng, -m, m);
                        }
                        for (const Buf& b : blocks) {
                          views.push_back(b.view());
                          ref_blocks.push_back(b.to_f64());
                        }
                        const float eps = 1e-5f;
                        const double ms = time_call(scale, dev, [&] { attn_res(partial, views, pw, nw, eps, out); });
                        Compare cmp;
                        cmp.output("out", out,
                                   oracle::attn_res(partial.to_f64(), ref_blocks, pw.to_f64(), nw.to_f64(), s.T, s.d, eps));
                        return cmp.result(ms);
                      }});
    }
  }
}

}  // namespace kimi::verify
