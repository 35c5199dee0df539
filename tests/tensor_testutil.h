// tests/tensor_testutil.h: moving test tensors between devices and reading their values (any device, any float
// dtype), and the error measures, shared by the tests that compare a CUDA result with a host one.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <vector>

#include "kimi/device.h"
#include "kimi/tensor.h"

namespace kimi::testutil {

// A new tensor on d with t's dtype, shape and values.
inline Tensor copy_to(const Tensor& t, Device d) {
  Tensor c(t.view().dtype, std::span<const int64_t>(t.view().shape.data(), size_t(t.view().ndim)), d);
  copy(c.view(), t.view());
  return c;
}

// t's values in row-major order as doubles (t on any device).
inline std::vector<double> host_values(const Tensor& t) {
  const Tensor h = copy_to(t, Device::cpu());
  std::vector<double> v(size_t(h.numel()));
  for (int64_t i = 0; i < h.numel(); ++i) v[size_t(i)] = load_as_f32(h.data(), h.view().dtype, i);
  return v;
}

// A 1-D integer tensor (dt i64 or i32) of v's values, on d.
inline Tensor ints(DType dt, const std::vector<int64_t>& v, Device d = Device::cpu()) {
  Tensor h(dt, {int64_t(v.size())});
  for (size_t i = 0; i < v.size(); ++i) {
    if (dt == DType::i64)
      h.data_as<int64_t>()[i] = v[i];
    else
      h.data_as<int32_t>()[i] = int32_t(v[i]);
  }
  return d.type == DeviceType::cpu ? std::move(h) : copy_to(h, d);
}

// Relative RMS error sqrt(sum (got - ref)^2 / sum ref^2) over got's elements (ref at least as long); not finite
// where ref is all zero.
inline double rel_rms(const std::vector<double>& got, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

// The relative RMS error over ref's elements (got at least as long), or the absolute RMS sqrt(sum (got - ref)^2)
// where ref is all zero (e.g. a state that stays zero).
inline double rel_rms_or_abs(const std::vector<double>& got, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) num += (got[i] - ref[i]) * (got[i] - ref[i]), den += ref[i] * ref[i];
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// Whether every value is finite (no NaN, no infinity).
inline bool all_finite(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
}

// Packed varlen batch of sequence lengths `lens`: offsets [0, l0, l0 + l1, ...] and the host i64 cu_seqlens tensor
// [N + 1] holding them.
struct Varlen {
  std::vector<int64_t> offsets;
  Tensor cu;
  explicit Varlen(const std::vector<int64_t>& lens) : offsets{0}, cu(DType::i64, {int64_t(lens.size()) + 1}) {
    for (int64_t l : lens) offsets.push_back(offsets.back() + l);
    std::memcpy(cu.data(), offsets.data(), offsets.size() * sizeof(int64_t));
  }
};

}  // namespace kimi::testutil
