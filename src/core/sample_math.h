// src/core/sample_math.h: the arithmetic of sample_tokens (kimi/ops/sample.h) that the CPU and CUDA kernels share,
// so that both compute the same integers: the order key of a logit, the integer weight w = floor(exp(d) * 2^40),
// the nucleus target and the draw.
//
// Every floating-point step is one IEEE fp64 add, multiply or divide, rounded to nearest: on the device through
// the __d*_rn intrinsics (never contracted into a fused multiply-add), on the host in a translation unit compiled
// with -ffp-contract=off (src/cpu/sample.cpp; CMakeLists.txt sets it). floor, ldexp and the conversions between
// integers below 2^53 and doubles are exact on both.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/splitmix.h"

#if defined(__CUDACC__)
#define KIMI_SAMPLE_FN __host__ __device__ __forceinline__
#else
#define KIMI_SAMPLE_FN inline
#endif

namespace kimi::sample_math {

inline constexpr int kWeightBits = 40;     // w = floor(exp(d) * 2^40): the top token weighs 2^40
inline constexpr double kMinExponent = -32;  // d below this: w = 0 (exp(-32) * 2^40 < 2^-6)

KIMI_SAMPLE_FN double add(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
KIMI_SAMPLE_FN double mul(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
KIMI_SAMPLE_FN double div(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}

KIMI_SAMPLE_FN uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
KIMI_SAMPLE_FN float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// The order key of a (non-NaN) logit: key(a) > key(b) exactly when a > b, and -0 and +0 share one key.
KIMI_SAMPLE_FN uint32_t order_key(float x) {
  uint32_t u = float_bits(x);
  if (u == 0x80000000u) u = 0;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
// The logit of a key (the canonical +0 for zero).
KIMI_SAMPLE_FN float key_logit(uint32_t k) { return bits_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k); }

// exp(d) * 2^40 for d in [kMinExponent, 0], by fixed IEEE fp64 operations: d = k ln2 + r (Cody-Waite, ln2 split so
// that k * ln2_hi is exact for |k| < 2^11), |r| <= ln2 / 2 + rounding, exp(r) by the degree-12 Taylor polynomial in
// Horner form (truncation error < 1e-17), then an exact scaling by 2^(k + 40).
KIMI_SAMPLE_FN double exp_scaled(double d) {
  constexpr double kLog2e = 1.4426950408889634074;
  constexpr double kLn2Hi = 6.93147180369123816490e-01, kLn2Lo = 1.90821492927058770002e-10;
  const double k = floor(add(mul(d, kLog2e), 0.5));
  const double r = add(add(d, -mul(k, kLn2Hi)), -mul(k, kLn2Lo));
  constexpr double c[13] = {1.0,
                            1.0,
                            1.0 / 2,
                            1.0 / 6,
                            1.0 / 24,
                            1.0 / 120,
                            1.0 / 720,
                            1.0 / 5040,
                            1.0 / 40320,
                            1.0 / 362880,
                            1.0 / 3628800,
                            1.0 / 39916800,
                            1.0 / 479001600};
  double p = c[12];
  for (int i = 11; i >= 0; --i) p = add(mul(p, r), c[i]);
  return ldexp(p, int(k) + kWeightBits);
}

// The integer weight of logit x in a row with maximum m at temperature t > 0 (kimi/ops/sample.h, step 4).
KIMI_SAMPLE_FN uint64_t weight(float x, float m, float t) {
  const double d = div(add(double(x), -double(m)), double(t));
  if (!(d >= kMinExponent)) return 0;  // also -inf logits
  return uint64_t(floor(exp_scaled(d)));
}

// The nucleus target: min(Z, ceil(top_p * Z)) in fp64 (Z < 2^64 converts to the nearest double on both sides).
KIMI_SAMPLE_FN uint64_t nucleus_need(float top_p, uint64_t z) {
#if defined(__CUDA_ARCH__)
  const double zd = __ull2double_rn(z);
#else
  const double zd = double(z);
#endif
  const double need = ceil(mul(double(top_p), zd));
  return need >= zd ? z : uint64_t(need);
}

// The draw of (seed, sequence, step): h = g(g(mix64(seed), sequence), step) of SplitMix64.
KIMI_SAMPLE_FN uint64_t draw(uint64_t seed, uint64_t sequence, uint64_t step) {
  return splitmix::element(splitmix::element(splitmix::mix64(seed), sequence), step);
}

// t = floor(h * w / 2^64): uniform in [0, w).
KIMI_SAMPLE_FN uint64_t scale_draw(uint64_t h, uint64_t w) { return uint64_t(splitmix::uniform_int(h, 0, w)); }

}  // namespace kimi::sample_math
