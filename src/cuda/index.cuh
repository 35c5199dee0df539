// src/cuda/index.cuh: the device form of an index argument (src/core/index.h) as kernels read it: an i32 or i64
// tensor at any stride on the launch's device, read element by element. The host never reads its values; the
// kernels that take one range-check every value they use (what an out-of-range value does is each operator's
// documented rule, never an access out of bounds).
#pragma once

#include <cstdint>

#include "kimi/dtype.h"
#include "kimi/tensor.h"

namespace kimi::cuda {

struct DevIndex {
  const void* p = nullptr;
  int64_t stride = 1;
  int is64 = 1;
  __device__ __forceinline__ int64_t operator[](int64_t i) const {
    return is64 ? static_cast<const int64_t*>(p)[i * stride] : int64_t(static_cast<const int32_t*>(p)[i * stride]);
  }
};

inline DevIndex dev_index(const TensorView& t) { return {t.data, t.strides[0], t.dtype == DType::i64 ? 1 : 0}; }

}  // namespace kimi::cuda
