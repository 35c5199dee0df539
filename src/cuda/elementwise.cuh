// src/cuda/elementwise.cuh: dtype-coded loads and stores shared by the simple CUDA kernels (conv, norms).
// A DType travels to the device as an int code; loads convert to f32, stores round to nearest even.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kimi/dtype.h"
#include "kimi/error.h"

namespace kimi::cuda {

enum ElemType : int { el_f32 = 0, el_bf16 = 1, el_f16 = 2 };

inline int elem_type(DType t) {
  switch (t) {
    case DType::f32: return el_f32;
    case DType::bf16: return el_bf16;
    case DType::f16: return el_f16;
    default: throw Error("cuda: unsupported float dtype " + std::string(dtype_name(t)));
  }
}

__device__ __forceinline__ float load_f32(const void* p, int64_t i, int t) {
  if (t == el_bf16) return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  if (t == el_f16) return __half2float(static_cast<const __half*>(p)[i]);
  return static_cast<const float*>(p)[i];
}

__device__ __forceinline__ void store_f32(void* p, int64_t i, int t, float x) {
  if (t == el_bf16) static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(x);
  else if (t == el_f16) static_cast<__half*>(p)[i] = __float2half_rn(x);
  else static_cast<float*>(p)[i] = x;
}

// x rounded to storage type t (round to nearest even) and back: what storing and reloading would give.
__device__ __forceinline__ float round_to(float x, int t) {
  if (t == el_bf16) return __bfloat162float(__float2bfloat16_rn(x));
  if (t == el_f16) return __half2float(__float2half_rn(x));
  return x;
}

__device__ __forceinline__ float sigmoid_f32(float z) { return 1.f / (1.f + __expf(-z)); }

}  // namespace kimi::cuda
