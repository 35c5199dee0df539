// src/core/views.h: reshaping views without copies (shared by the operators and the model runtime).
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "kimi/tensor.h"

namespace kimi::view {

// t with a new dimension of size 1 at position `at` (0 <= at <= ndim): [a, b] -> at 0: [1, a, b], at 1: [a, 1, b].
inline TensorView insert_dim(const TensorView& t, int at) {
  std::array<int64_t, kMaxDims> shape{}, strides{};
  int o = 0;
  for (int d = 0; d <= t.ndim; ++d) {
    if (d == at) {
      shape[size_t(o)] = 1;
      strides[size_t(o)] = d < t.ndim ? t.strides[size_t(d)] * t.shape[size_t(d)] : 1;
      ++o;
    }
    if (d < t.ndim) shape[size_t(o)] = t.shape[size_t(d)], strides[size_t(o)] = t.strides[size_t(d)], ++o;
  }
  return TensorView(t.data, t.dtype, std::span<const int64_t>(shape.data(), size_t(o)),
                    std::span<const int64_t>(strides.data(), size_t(o)), t.device);
}

// A leading batch dimension of 1: [a, b, ...] -> [1, a, b, ...] (packed batches for the [B, T, ...] operators).
inline TensorView insert_dim0(const TensorView& t) { return insert_dim(t, 0); }

// The last dimension (stride 1) split into heads: [..., H*D] -> [..., H, D].
inline TensorView split_last(const TensorView& t, int64_t heads) {
  std::array<int64_t, kMaxDims> shape{}, strides{};
  const int n = t.ndim;
  for (int d = 0; d + 1 < n; ++d) shape[size_t(d)] = t.shape[size_t(d)], strides[size_t(d)] = t.strides[size_t(d)];
  const int64_t D = t.shape[size_t(n - 1)] / heads;
  shape[size_t(n - 1)] = heads, strides[size_t(n - 1)] = D;
  shape[size_t(n)] = D, strides[size_t(n)] = 1;
  return TensorView(t.data, t.dtype, std::span<const int64_t>(shape.data(), size_t(n + 1)),
                    std::span<const int64_t>(strides.data(), size_t(n + 1)), t.device);
}

}  // namespace kimi::view
