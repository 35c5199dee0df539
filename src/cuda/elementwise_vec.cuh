// src/cuda/elementwise_vec.cuh: 8-element vector loads and stores for the streaming kernels (conv, norms, KDA gate):
// the dtype-coded loads of cuda/elementwise.cuh, 16 bytes per memory instruction.
//   load8(p, i, t, v):  v[k] = f32(p[i + k]), k = 0..7      one 16-byte load for bf16 / f16, two for f32
//   store8(p, i, t, v): p[i + k] = round_nearest_even(v[k])  the same rounding as store_f32
// Invariant (checked by the launchers through vec8_ok): p is 16-byte aligned and i is a multiple of 8, so each
// access is one aligned 16-byte transaction. The dtype code t is uniform across the warp (no divergence).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/elementwise.cuh"

namespace kimi::cuda {

inline constexpr int kVec = 8;  // elements per vector access

// Whether 8-element vector accesses at element offsets that are multiples of `step` (a row stride, a leading
// stride, the row length) are aligned for data at `p`.
inline bool vec8_aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
inline bool vec8_step(int64_t step) { return step % kVec == 0; }

__device__ __forceinline__ float bf16_lo(uint32_t u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t u) { return __uint_as_float(u & 0xffff0000u); }

__device__ __forceinline__ void unpack_bf16x8(uint4 u, float (&v)[kVec]) {
  v[0] = bf16_lo(u.x), v[1] = bf16_hi(u.x), v[2] = bf16_lo(u.y), v[3] = bf16_hi(u.y);
  v[4] = bf16_lo(u.z), v[5] = bf16_hi(u.z), v[6] = bf16_lo(u.w), v[7] = bf16_hi(u.w);
}

__device__ __forceinline__ void unpack_f16x8(uint4 u, float (&v)[kVec]) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    __half2 h;
    static_assert(sizeof(h) == sizeof(uint32_t));
    __builtin_memcpy(&h, &w[k], sizeof(h));
    const float2 f = __half22float2(h);
    v[2 * k] = f.x, v[2 * k + 1] = f.y;
  }
}

// 8 elements as stored (lo: the 16 bytes of bf16 / f16, or f32 elements 0..3; hi: f32 elements 4..7). Kernels that
// want several loads in flight load raw first and unpack after the last load: an unpack right after its load makes
// the thread wait for that load before it issues the next one (one 16-byte access in flight per thread).
struct Raw8 {
  uint4 lo, hi;
};

__device__ __forceinline__ void load_raw8(const void* p, int64_t i, int t, Raw8& r) {
  if (t == el_f32) {
    const uint4* q = reinterpret_cast<const uint4*>(static_cast<const float*>(p) + i);
    r.lo = q[0], r.hi = q[1];
    return;
  }
  r.lo = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p) + i);
  r.hi = make_uint4(0, 0, 0, 0);
}

__device__ __forceinline__ void unpack8(const Raw8& r, int t, float (&v)[kVec]) {
  if (t == el_f32) {
    const uint32_t w[8] = {r.lo.x, r.lo.y, r.lo.z, r.lo.w, r.hi.x, r.hi.y, r.hi.z, r.hi.w};
#pragma unroll
    for (int k = 0; k < kVec; ++k) v[k] = __uint_as_float(w[k]);
    return;
  }
  if (t == el_bf16) unpack_bf16x8(r.lo, v);
  else unpack_f16x8(r.lo, v);
}

__device__ __forceinline__ void load8(const void* p, int64_t i, int t, float (&v)[kVec]) {
  Raw8 r;
  load_raw8(p, i, t, r);
  unpack8(r, t, v);
}

__device__ __forceinline__ uint32_t pack2(float a, float b, int t) {
  uint32_t u;
  if (t == el_bf16) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);  // .x = a, the lower address
    __builtin_memcpy(&u, &h, sizeof(u));
  } else {
    const __half2 h = __floats2half2_rn(a, b);
    __builtin_memcpy(&u, &h, sizeof(u));
  }
  return u;
}

__device__ __forceinline__ void store8(void* p, int64_t i, int t, const float (&v)[kVec]) {
  if (t == el_f32) {
    float4* q = reinterpret_cast<float4*>(static_cast<float*>(p) + i);
    q[0] = make_float4(v[0], v[1], v[2], v[3]);
    q[1] = make_float4(v[4], v[5], v[6], v[7]);
    return;
  }
  const uint4 u = make_uint4(pack2(v[0], v[1], t), pack2(v[2], v[3], t), pack2(v[4], v[5], t), pack2(v[6], v[7], t));
  *reinterpret_cast<uint4*>(static_cast<uint16_t*>(p) + i) = u;
}

}  // namespace kimi::cuda
