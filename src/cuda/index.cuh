// src/cuda/index.cuh: the device form of an index argument (src/core/index.h) as kernels read it: an i32 or i64
// tensor at any stride on the launch's device, read element by element. The host never reads its values; the
// kernels that take one range-check every value they use (what an out-of-range value does is each operator's
// documented rule, never an access out of bounds).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cuda/check.cuh"
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

// The values of a 1-d i32 / i64 index tensor (any stride) on the host, for launchers that build host tables from
// one: a host tensor is read in place, a device one copied back (a synchronous copy: the model passes host tensors).
inline std::vector<int64_t> index_values(const TensorView& t) {
  const int64_t n = t.shape[0], stride = t.strides[0];
  const size_t esz = t.element_size();
  std::vector<unsigned char> raw(size_t(n > 0 ? (n - 1) * stride + 1 : 0) * esz);
  if (t.device.type == DeviceType::cuda) {
    const DeviceGuard device_guard(t.device.index);
    KIMI_CUDA_CHECK(cudaMemcpy(raw.data(), t.data, raw.size(), cudaMemcpyDeviceToHost));
  } else if (!raw.empty()) {
    std::copy_n(static_cast<const unsigned char*>(t.data), raw.size(), raw.data());
  }
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[size_t(i)] = t.dtype == DType::i32 ? int64_t(reinterpret_cast<const int32_t*>(raw.data())[i * stride])
                                         : reinterpret_cast<const int64_t*>(raw.data())[i * stride];
  return v;
}

}  // namespace kimi::cuda
