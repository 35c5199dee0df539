// kimi/dtype.h: storage element types and their conversions to and from fp32.
//
// Every operator computes in fp32 (or better) whatever the storage dtype; these are the exact
// conversions it uses. bf16 and f16 are stored as raw 16-bit patterns so that this header needs
// no CUDA or compiler extension. Conversions to 16 bits round to nearest even; NaN stays NaN.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace kimi {

enum class DType : uint8_t { f32, bf16, f16, u8, i32, i64 };

// Bytes per element.
constexpr int dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::bf16: return 2;
    case DType::f16: return 2;
    case DType::u8: return 1;
    case DType::i32: return 4;
    case DType::i64: return 8;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::u8: return "u8";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
  }
  return "?";
}

constexpr bool is_float(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// bf16 <-> f32 (bf16 is the top half of an f32).
inline float bf16_to_f32(uint16_t h) { return f32_from_bits(uint32_t(h) << 16); }
inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);                                          // round to nearest even
  return uint16_t(u >> 16);
}

// IEEE half <-> f32.
inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0) {
    if (man == 0) return f32_from_bits(sign);
    // subnormal: value = man * 2^-24
    float v = float(man) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (exp == 31) return f32_from_bits(sign | 0x7f800000u | (man << 13));
  return f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
}
inline uint16_t f32_to_f16(float f) {
  const uint32_t u = f32_bits(f);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u);  // NaN
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // overflow (>= 65520 rounds to inf)
  if (a < 0x38800000u) {                                   // subnormal or zero in half
    // value / 2^-24, rounded to nearest even
    const float v = f32_from_bits(a) * 16777216.0f;
    uint32_t m = uint32_t(v);
    const float rem = v - float(m);
    if (rem > 0.5f || (rem == 0.5f && (m & 1u))) ++m;
    return uint16_t(sign | m);
  }
  uint32_t r = a - 0x38000000u;                 // rebias exponent 127 -> 15 (in f32 bit positions)
  r += 0xfffu + ((r >> 13) & 1u);               // round to nearest even on the 13 dropped bits
  return uint16_t(sign | (r >> 13));
}

// Reads element i of a float buffer of dtype t as f32.
inline float load_as_f32(const void* base, DType t, int64_t i) {
  switch (t) {
    case DType::f32: return static_cast<const float*>(base)[i];
    case DType::bf16: return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::f16: return f16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::u8: return float(static_cast<const uint8_t*>(base)[i]);
    case DType::i32: return float(static_cast<const int32_t*>(base)[i]);
    case DType::i64: return float(static_cast<const int64_t*>(base)[i]);
  }
  return 0.f;
}

// Writes f32 v into element i of a float buffer of dtype t (rounding to nearest even).
inline void store_from_f32(void* base, DType t, int64_t i, float v) {
  switch (t) {
    case DType::f32: static_cast<float*>(base)[i] = v; return;
    case DType::bf16: static_cast<uint16_t*>(base)[i] = f32_to_bf16(v); return;
    case DType::f16: static_cast<uint16_t*>(base)[i] = f32_to_f16(v); return;
    case DType::u8: static_cast<uint8_t*>(base)[i] = uint8_t(v); return;
    case DType::i32: static_cast<int32_t*>(base)[i] = int32_t(v); return;
    case DType::i64: static_cast<int64_t*>(base)[i] = int64_t(v); return;
  }
}

}  // namespace kimi
