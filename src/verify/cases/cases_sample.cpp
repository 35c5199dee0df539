// Harness cases for kimi/ops/sample.h: the rows whose token the definition fixes without the draw (temperature 0;
// top_k = 1; a nucleus top_p = 1e-6 that only the top token reaches), in a batch that mixes them with different
// temperatures, seeds and steps, f32 and bf16 logits with odd vocabularies and repeated maxima. The token is the
// lowest argmax of the dtype-rounded row, computed here in fp64; the bound is 0 (an exact token).
#include <random>

#include "kimi/ops/sample.h"
#include "verify/cases/buf.h"
#include "verify/cases/case.h"

namespace kimi::verify {

void add_sample_cases(CaseList& list, Scale scale) {
  struct Shape {
    int64_t N, V;
  };
  const std::vector<Shape> shapes =
      scale == Scale::test ? std::vector<Shape>{{1, 7}, {37, 1000}, {5, 4099}} : std::vector<Shape>{{128, 163840}};
  for (const DType dt : {DType::f32, DType::bf16})
    for (const Shape s : shapes) {
      const std::string shape = "N=" + std::to_string(s.N) + " V=" + std::to_string(s.V);
      list.push_back({"sample_tokens", shape, dt, 0.0, [=](Device dev) {
                        std::mt19937_64 rng(uint64_t(s.N * 131 + s.V));
                        Buf logits(dev, dt, {s.N, s.V}, 3);  // padded rows: a row stride > V
                        logits.uniform(rng, -4.0, 4.0);
                        Buf t(dev, DType::f32, {s.N}), k(dev, DType::i32, {s.N}), p(dev, DType::f32, {s.N});
                        Buf seed(dev, DType::i64, {s.N}), seq(dev, DType::i64, {s.N}), step(dev, DType::i64, {s.N});
                        std::vector<float> tv, pv;
                        std::vector<int64_t> kv, sv, qv, nv;
                        for (int64_t n = 0; n < s.N; ++n) {
                          const int kind = int(n % 3);  // greedy, top-1, a tiny nucleus
                          tv.push_back(kind == 0 ? 0.f : 0.5f + float(n % 5));
                          kv.push_back(kind == 1 ? 1 : int64_t(n % 4) * 20);
                          pv.push_back(kind == 2 ? 1e-6f : 1.f);
                          sv.push_back(int64_t(rng())), qv.push_back(n), nv.push_back(int64_t(rng() % 100));
                        }
                        t.set(tv), p.set(pv), k.set_ints(kv), seed.set_ints(sv), seq.set_ints(qv), step.set_ints(nv);
                        Buf out(dev, DType::i32, {s.N});
                        const SampleParams params{t, k, p, seed, seq, step};
                        const double ms = time_call(scale, dev, [&] { sample_tokens(logits, params, out); });
                        const std::vector<double> x = logits.to_f64();
                        std::vector<double> want;
                        for (int64_t n = 0; n < s.N; ++n) {
                          int64_t best = 0;
                          for (int64_t i = 1; i < s.V; ++i)
                            if (x[size_t(n * s.V + i)] > x[size_t(n * s.V + best)]) best = i;
                          want.push_back(double(best));
                        }
                        const std::vector<int64_t> got = out.to_ints();
                        Compare cmp;
                        cmp.values("tokens", std::vector<double>(got.begin(), got.end()), want);
                        return cmp.result(ms);
                      }});
    }
}

}  // namespace kimi::verify
