// Harness cases for kimi/ops/random.h against src/verify/oracle/random.h: every dtype, the ranges the model's
// random weights use (kimi/model/random_weights.h: bf16 weights around 0 and around 1, f32 parameters,
// MXFP4 codes and scales), odd sizes. The fill is defined bit for bit, so the bound is 0 on every backend.
#include "kimi/ops/random.h"
#include "verify/cases/buf.h"
#include "verify/cases/case.h"
#include "verify/oracle/random.h"

namespace kimi::verify {

namespace {
struct Fill {
  DType dtype;
  std::vector<int64_t> shape;
  double lo, hi;
  uint64_t seed;
};

std::string shape_str(const Fill& f) {
  std::string s = "[";
  for (size_t i = 0; i < f.shape.size(); ++i) s += (i ? ", " : "") + std::to_string(f.shape[i]);
  return s + "] in [" + std::to_string(f.lo) + ", " + std::to_string(f.hi) + "] seed " + std::to_string(f.seed);
}
}  // namespace

void add_random_cases(CaseList& list, Scale scale) {
  std::vector<Fill> fills;
  if (scale == Scale::test) {
    fills = {{DType::bf16, {37, 129}, -0.0625, 0.0625, 1},   {DType::bf16, {256}, 0.9, 1.1, 2},
             {DType::f32, {1, 1, 7, 1}, -1.0, 0.0, 3},      {DType::f32, {1000}, -0.05, 0.05, 4},
             {DType::u8, {16, 48}, 0, 255, 5},              {DType::u8, {16, 3}, 120, 121, 6},
             {DType::i32, {333}, -2147483648.0, 2147483647.0, 7}, {DType::f32, {1}, 2.5, 2.5, 8}};
  } else {
    fills = {{DType::bf16, {7168, 3072}, -0.0198, 0.0198, 1}, {DType::u8, {3072, 3584}, 0, 255, 2}};
  }
  for (const Fill& f : fills) {
    list.push_back({"fill_random", shape_str(f), f.dtype, 0.0, [=](Device dev) {
                      Buf t(dev, f.dtype, f.shape);
                      const double ms = time_call(scale, dev, [&] { fill_random(t, f.seed, f.lo, f.hi); });
                      Compare cmp;
                      if (is_float(f.dtype)) {
                        std::vector<double> ref = oracle::fill_random_float(f.seed, t.numel(), f.lo, f.hi);
                        for (double& v : ref) v = round_as(f.dtype, double(float(v)));
                        cmp.output("t", t, ref);
                      } else {
                        const std::vector<int64_t> ref = oracle::fill_random_int(f.seed, t.numel(), int64_t(f.lo), int64_t(f.hi));
                        const std::vector<int64_t> got = t.to_ints();
                        cmp.values("t", std::vector<double>(got.begin(), got.end()), std::vector<double>(ref.begin(), ref.end()));
                      }
                      return cmp.result(ms);
                    }});
  }
}

}  // namespace kimi::verify
