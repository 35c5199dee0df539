// src/cpu/vec_math.h: element functions written so that GCC vectorizes loops over them without
// -ffast-math (no libm call, no floating-point compare: clamps and selects are integer operations).
#pragma once

#include <bit>
#include <cstdint>

namespace kimi::cpu {

inline constexpr uint32_t kExpClampBits = 0x42AE0000u;  // bits of 87.f: e^87 and e^-87 are normal floats

// e^v for v in [-87, 87] (the caller clamps; NaN is the caller's to handle). Cephes' expf polynomial with
// Cody-Waite reduction and rounding by the 1.5 * 2^23 trick: < 1 ulp on the range.
inline float exp_clamped(float v) {
  const float m = (v * 1.44269504088896341f + 12582912.f) - 12582912.f;  // round(v / ln 2)
  float r = v - m * 0.693359375f;
  r = r + m * 2.12194440e-4f;  // v - m ln 2 in two parts
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.f;
  return p * std::bit_cast<float>(static_cast<uint32_t>(static_cast<int32_t>(m) + 127) << 23);  // * 2^m
}

}  // namespace kimi::cpu
