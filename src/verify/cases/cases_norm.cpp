// Harness cases for kimi/ops/norm.h against src/verify/oracle/norm.h.
#include <random>

#include "kimi/ops/norm.h"
#include "verify/oracle/norm.h"
#include "verify/cases/buf.h"
#include "verify/cases/case.h"

namespace kimi::verify {

namespace {
struct Shape {
  int64_t rows, d;
  int64_t pad;  // row padding for a strided (non-contiguous) view
};

std::string shape_str(const Shape& s) {
  return "rows=" + std::to_string(s.rows) + " D=" + std::to_string(s.d) + (s.pad ? " strided" : "");
}
}  // namespace

void add_norm_cases(CaseList& list, Scale scale) {
  std::vector<Shape> shapes;
  if (scale == Scale::test) {
    shapes = {{1, 1, 0}, {3, 17, 0}, {5, 64, 3}, {7, 129, 0}, {2, 2304, 0}};
  } else {
    shapes = {{512, 2304, 0}, {512, 7168, 0}, {512 * 32, 128, 0}};  // Kimi-Linear / K3 hidden, KDA heads
  }
  for (const Shape& s : shapes) {
    for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
      if (scale == Scale::check && dt == DType::f16) continue;
      list.push_back({"rms_norm", shape_str(s), dt, tol_for(dt), [=](Device dev) {
                        std::mt19937_64 rng(1 + s.rows * 131 + s.d);
                        Buf x(dev, dt, {s.rows, s.d}, s.pad), w(dev, dt, {s.d}), y(dev, dt, {s.rows, s.d}, s.pad);
                        x.uniform(rng, -3, 3);
                        w.uniform(rng, 0.5, 1.5);
                        const float eps = 1e-5f;
                        const double ms = time_call(scale, dev, [&] { rms_norm(x, w, eps, y); });
                        Compare cmp;
                        cmp.output("y", y, oracle::rms_norm(x.to_f64(), w.to_f64(), s.rows, s.d, eps,
                                                            [dt](double v) { return round_as(dt, v); }));
                        return cmp.result(ms);
                      }});
      list.push_back({"add_rms_norm", shape_str(s), dt, tol_for(dt), [=](Device dev) {
                        std::mt19937_64 rng(2 + s.rows * 131 + s.d);
                        Buf x(dev, dt, {s.rows, s.d}, s.pad), r(dev, dt, {s.rows, s.d}), w(dev, DType::f32, {s.d});
                        Buf sum(dev, dt, {s.rows, s.d}), y(dev, dt, {s.rows, s.d}, s.pad);
                        x.uniform(rng, -3, 3);
                        r.uniform(rng, -3, 3);
                        w.uniform(rng, 0.5, 1.5);
                        const float eps = 1e-6f;
                        const double ms = time_call(scale, dev, [&] { add_rms_norm(x, r, w, eps, sum, y); });
                        auto xs = x.to_f64();
                        const auto rs = r.to_f64();
                        for (size_t i = 0; i < xs.size(); ++i) xs[i] = round_as(dt, xs[i] + rs[i]);
                        Compare cmp;
                        cmp.output("sum", sum, xs);
                        cmp.output("y", y, oracle::rms_norm(xs, w.to_f64(), s.rows, s.d, eps,
                                                            [dt](double v) { return round_as(dt, v); }));
                        return cmp.result(ms);
                      }});
      if (scale == Scale::test && s.pad)  // sum written over residual (the decoder's residual stream)
        list.push_back({"add_rms_norm", shape_str(s) + " sum=residual", dt, tol_for(dt), [=](Device dev) {
                          std::mt19937_64 rng(5 + s.rows * 131 + s.d);
                          Buf x(dev, dt, {s.rows, s.d}), r(dev, dt, {s.rows, s.d}, s.pad), w(dev, dt, {s.d});
                          Buf y(dev, DType::f32, {s.rows, s.d});
                          x.uniform(rng, -3, 3);
                          r.uniform(rng, -3, 3);
                          w.uniform(rng, 0.5, 1.5);
                          auto xs = x.to_f64();
                          const auto rs = r.to_f64();
                          for (size_t i = 0; i < xs.size(); ++i) xs[i] = round_as(dt, xs[i] + rs[i]);
                          const double ms = time_call(scale, dev, [&] { add_rms_norm(x, r, w, 1e-6f, r, y); });
                          Compare cmp;
                          cmp.output("sum", r, xs);
                          cmp.output("y", y, oracle::rms_norm(xs, w.to_f64(), s.rows, s.d, 1e-6,
                                                              [dt](double v) { return round_as(dt, v); }));
                          return cmp.result(ms);
                        }});
      list.push_back({"gated_rms_norm", shape_str(s), dt, tol_for(dt), [=](Device dev) {
                        std::mt19937_64 rng(3 + s.rows * 131 + s.d);
                        Buf o(dev, dt, {s.rows, s.d}, s.pad), z(dev, dt, {s.rows, s.d}), w(dev, DType::f32, {s.d});
                        Buf y(dev, dt, {s.rows, s.d});
                        o.uniform(rng, -2, 2);
                        z.uniform(rng, -6, 6);
                        w.uniform(rng, 0.5, 1.5);
                        const double ms = time_call(scale, dev, [&] { gated_rms_norm(o, z, w, 1e-5f, y); });
                        const auto zf = z.to_f64();
                        Compare cmp;
                        cmp.output("y", y, oracle::gated_rms_norm(o.to_f64(), &zf, w.to_f64(), s.rows, s.d, 1e-5));
                        return cmp.result(ms);
                      }});
      list.push_back({"l2_norm", shape_str(s), dt, tol_for(dt), [=](Device dev) {
                        std::mt19937_64 rng(4 + s.rows * 131 + s.d);
                        Buf x(dev, dt, {s.rows, s.d}, s.pad), y(dev, dt, {s.rows, s.d}, s.pad);
                        x.uniform(rng, -1, 1);
                        const double ms = time_call(scale, dev, [&] { l2_norm(x, y, 1e-6f); });
                        Compare cmp;
                        cmp.output("y", y, oracle::l2_norm(x.to_f64(), s.rows, s.d, 1e-6));
                        return cmp.result(ms);
                      }});
    }
  }
}

}  // namespace kimi::verify
