// Implementation of src/verify/cases/case.h.
#include "verify/cases/case.h"

#include <algorithm>
#include <cmath>

#include "kimi/device.h"

namespace kimi::verify {

CaseList all_cases(Scale scale) {
  CaseList list;
  add_norm_cases(list, scale);
  add_linear_cases(list, scale);
  add_mxfp4_cases(list, scale);
  add_conv_cases(list, scale);
  add_kda_cases(list, scale);
  add_kda_decode_cases(list, scale);
  add_mla_cases(list, scale);
  add_moe_cases(list, scale);
  add_attn_res_cases(list, scale);
  add_gather_cases(list, scale);
  add_random_cases(list, scale);
  add_sample_cases(list, scale);
  return list;
}

double rel_err(const std::vector<double>& got, const std::vector<double>& ref) {
  if (got.size() != ref.size()) return INFINITY;
  long double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const long double d = (long double)got[i] - ref[i];
    num += d * d;
    den += (long double)ref[i] * ref[i];
  }
  if (den == 0) return double(std::sqrt(num));
  return double(std::sqrt(num / den));
}

bool all_finite(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
}

void Compare::values(const std::string& name, const std::vector<double>& got, const std::vector<double>& ref) {
  const double e = rel_err(got, ref);
  if (!all_finite(got)) {
    result_.finite = false;
    nonfinite_ += (nonfinite_.empty() ? "" : ", ") + name + " has NaN/Inf";
  }
  if (!(e <= result_.err)) {  // NaN-safe max
    result_.err = e;
    worst_ = name;
  }
}

double time_call(Scale scale, Device dev, const std::function<void()>& fn) {
  using clock = std::chrono::steady_clock;
  const int reps = scale == Scale::check ? 5 : 1;
  if (scale == Scale::check) {
    fn();  // warm-up
    synchronize(dev);
  }
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = clock::now();
    fn();
    synchronize(dev);
    ms.push_back(std::chrono::duration<double, std::milli>(clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

std::string dtype_str(DType t) { return std::string(dtype_name(t)); }

double tol_for(DType t) { return t == DType::f32 ? 1e-5 : t == DType::f16 ? 1e-3 : 5e-3; }

double round_as(DType t, double v) {
  switch (t) {
    case DType::bf16: return bf16_to_f32(f32_to_bf16(float(v)));
    case DType::f16: return f16_to_f32(f32_to_f16(float(v)));
    default: return v;
  }
}

}  // namespace kimi::verify
