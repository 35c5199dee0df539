// tests/tensor_testutil.h: moving test tensors between devices and reading their values (any device, any float
// dtype), shared by the tests that compare a CUDA result with a host one.
#pragma once

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
