// src/core/splitmix.h: the counter-based generator of fill_random (kimi/ops/random.h), one definition for the
// CPU kernel and the CUDA kernel so that both compute exactly the same operations (bit-identical fills).
//
// Element i of a fill started at `state` = mix64(seed) is h_i = mix64(state + (i + 1) * kGamma), the (i+1)-th
// output of SplitMix64 (Steele, Lea, Flood 2014). Floats: 24 bits k = h >> 40, v = lo + (width * k) * 2^-24
// in fp64 (width is an f32, so width * k is exact and a fused multiply-add gives the same value), rounded to
// f32. Integers: lo + floor(h * count / 2^64) (the high half of the 128-bit product).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define KIMI_SPLITMIX_FN __host__ __device__ __forceinline__
#else
#define KIMI_SPLITMIX_FN inline
#endif

namespace kimi::splitmix {

inline constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;

KIMI_SPLITMIX_FN uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// h_i of a fill started at `state`.
KIMI_SPLITMIX_FN uint64_t element(uint64_t state, uint64_t i) { return mix64(state + (i + 1) * kGamma); }

KIMI_SPLITMIX_FN float uniform_f32(uint64_t h, double lo, float width) {
  const double k = double(h >> 40);
  return float(double(width) * k * 0x1p-24 + lo);
}

KIMI_SPLITMIX_FN int64_t uniform_int(uint64_t h, int64_t lo, uint64_t count) {
#if defined(__CUDA_ARCH__)
  return lo + int64_t(__umul64hi(h, count));
#else
  const uint64_t a0 = h & 0xffffffffu, a1 = h >> 32, b0 = count & 0xffffffffu, b1 = count >> 32;
  const uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
  const uint64_t mid = (p00 >> 32) + (p01 & 0xffffffffu) + (p10 & 0xffffffffu);
  return lo + int64_t(p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32));  // the high half of h * count
#endif
}

// f32 -> bf16 bits, nearest even, NaN stays a quiet NaN (the rounding of kimi/dtype.h's f32_to_bf16).
KIMI_SPLITMIX_FN uint16_t bf16_bits(float f) {
#if defined(__CUDA_ARCH__)
  uint32_t u = __float_as_uint(f);
#else
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
#endif
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

}  // namespace kimi::splitmix
