// kimi/ops/mxfp4.h: bad input, the packing layout on a hand-made example, NaN scales, exact round
// trips and the quantization error bound (random values are covered by the harness).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "expect_error.h"
#include "kimi/ops/mxfp4.h"

namespace kimi {
namespace {

std::vector<float> as_floats(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[size_t(i)] = load_as_f32(t.data(), t.view().dtype, i);
  return v;
}

TEST(Mxfp4, RejectsBadArguments) {
  Tensor p(DType::u8, {4, 32}), s(DType::u8, {4, 2}), w(DType::f32, {4, 64});
  EXPECT_NO_THROW(mxfp4_dequant(p, s, w));
  Tensor p_bad(DType::u8, {4, 31}), s_bad(DType::u8, {4, 3}), w48(DType::f32, {4, 48}), wi(DType::i32, {4, 64});
  Tensor pf(DType::f32, {4, 32}), s5(DType::u8, {5, 2}), p3(DType::u8, {4, 32, 1});
  EXPECT_KIMI_ERROR(mxfp4_dequant(p_bad, s, w), "mxfp4_dequant", "'packed'", "[4, 32]", "[4, 31]");
  EXPECT_KIMI_ERROR(mxfp4_dequant(p, s_bad, w), "mxfp4_dequant", "'scale'", "[4, 2]", "[4, 3]");
  EXPECT_KIMI_ERROR(mxfp4_dequant(p, s5, w), "'scale'", "[4, 2]", "[5, 2]");
  EXPECT_KIMI_ERROR(mxfp4_dequant(p, s, w48), "'w'", "divisible by 32", "48");
  EXPECT_KIMI_ERROR(mxfp4_dequant(p, s, wi), "'w'", "f32/bf16/f16", "i32");
  EXPECT_KIMI_ERROR(mxfp4_dequant(pf, s, w), "'packed'", "u8", "f32");
  EXPECT_KIMI_ERROR(mxfp4_dequant(p3, s, w), "'packed'", "2 dimensions", "3");
  EXPECT_KIMI_ERROR(mxfp4_dequant(TensorView{}, s, w), "'packed'", "none");
  EXPECT_KIMI_ERROR(mxfp4_dequant(p, s, w.view().transpose(0, 1)), "'w'");
  EXPECT_KIMI_ERROR(mxfp4_quant(w, p_bad, s), "mxfp4_quant", "'packed'", "[4, 32]", "[4, 31]");
  EXPECT_KIMI_ERROR(mxfp4_quant(w, p, s_bad), "mxfp4_quant", "'scale'", "[4, 2]", "[4, 3]");
  EXPECT_KIMI_ERROR(mxfp4_quant(w48, p, s), "mxfp4_quant", "'w'", "divisible by 32", "48");
  // Output rows that overlap would be written by several threads.
  int64_t shp[] = {4, 32}, str[] = {0, 1};
  EXPECT_KIMI_ERROR(mxfp4_quant(w, TensorView(p.data(), DType::u8, shp, str), s), "'packed'", "non-overlapping",
                    "stride(0) 0");
  TensorView pg = p.view();
  pg.device = Device::cuda(0);
  EXPECT_KIMI_ERROR(mxfp4_dequant(pg, s, w), "mxfp4_dequant", "'scale'", "cuda:0", "cpu");
}

// Low nibble = even column, high nibble = odd column; bit 3 = sign; scale 2^(e - 127).
TEST(Mxfp4, NibbleOrderOnAHandMadeRow) {
  Tensor p(DType::u8, {1, 32}), s(DType::u8, {1, 2}), w(DType::f32, {1, 64});
  auto* pb = p.data_as<uint8_t>();
  pb[0] = 0x71;   // col 0: code 1 (0.5), col 1: code 7 (6)
  pb[1] = 0xA9;   // col 2: code 9 (-0.5), col 3: code 10 (-1)
  pb[15] = 0x8F;  // col 30: code 15 (-6), col 31: code 8 (-0)
  pb[16] = 0x35;  // col 32: code 5 (3), col 33: code 3 (1.5) in block 1
  s.data_as<uint8_t>()[0] = 127;  // 1
  s.data_as<uint8_t>()[1] = 125;  // 0.25
  mxfp4_dequant(p, s, w);
  const float* v = w.data_as<float>();
  EXPECT_EQ(v[0], 0.5f);
  EXPECT_EQ(v[1], 6.f);
  EXPECT_EQ(v[2], -0.5f);
  EXPECT_EQ(v[3], -1.f);
  EXPECT_EQ(v[4], 0.f);
  EXPECT_EQ(v[30], -6.f);
  EXPECT_EQ(v[31], 0.f);
  EXPECT_TRUE(std::signbit(v[31]));
  EXPECT_EQ(v[32], 0.75f);
  EXPECT_EQ(v[33], 0.375f);
  // And back: the first block's amax is 6 -> e = 127; the second's is 0.75 -> e = floor(log2 .75) + 125 = 124,
  // so its codes double: 0.75 / 2^-3 = 6 (code 7), 0.375 / 2^-3 = 3 (code 5).
  Tensor p2(DType::u8, {1, 32}), s2(DType::u8, {1, 2});
  mxfp4_quant(w, p2, s2);
  EXPECT_EQ(s2.data_as<uint8_t>()[0], 127);
  EXPECT_EQ(s2.data_as<uint8_t>()[1], 124);
  EXPECT_EQ(p2.data_as<uint8_t>()[0], 0x71);
  EXPECT_EQ(p2.data_as<uint8_t>()[1], 0xA9);
  EXPECT_EQ(p2.data_as<uint8_t>()[15], 0x8F);
  EXPECT_EQ(p2.data_as<uint8_t>()[16], 0x57);
}

TEST(Mxfp4, Scale255IsNaNForItsBlockOnly) {
  Tensor p(DType::u8, {2, 32}), s(DType::u8, {2, 2}), w(DType::bf16, {2, 64});
  std::memset(p.data(), 0x22, 64);  // every code 2 (1.0), including zeros' place
  auto* sb = s.data_as<uint8_t>();
  sb[0] = 127, sb[1] = 255, sb[2] = 0, sb[3] = 254;
  mxfp4_dequant(p, s, w);
  const auto v = as_floats(w);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(v[size_t(i)], 1.f);
  for (int i = 32; i < 64; ++i) EXPECT_TRUE(std::isnan(v[size_t(i)]));
  for (int i = 64; i < 96; ++i) EXPECT_EQ(v[size_t(i)], std::ldexp(1.f, -127));  // e = 0: 2^-127 (subnormal in f32)
  for (int i = 96; i < 128; ++i) EXPECT_EQ(v[size_t(i)], std::ldexp(1.f, 127));
}

// NaN or Inf in a block: the documented choice is the E8M0 NaN scale (255) with codes 0, so the block
// dequantizes to NaN and no other block is affected.
TEST(Mxfp4, QuantOfNonFiniteBlockGivesNaNScale) {
  Tensor w(DType::f32, {1, 96}), p(DType::u8, {1, 48}), s(DType::u8, {1, 3}), back(DType::f32, {1, 96});
  float* v = w.data_as<float>();
  for (int i = 0; i < 96; ++i) v[i] = 1.f;
  v[40] = NAN;
  v[70] = -INFINITY;
  mxfp4_quant(w, p, s);
  EXPECT_EQ(s.data_as<uint8_t>()[0], 125);  // amax 1: floor(log2 1) - 2 + 127
  EXPECT_EQ(s.data_as<uint8_t>()[1], 255);
  EXPECT_EQ(s.data_as<uint8_t>()[2], 255);
  for (int j = 16; j < 48; ++j) EXPECT_EQ(p.data_as<uint8_t>()[j], 0);
  mxfp4_dequant(p, s, back);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(back.data_as<float>()[i], 1.f);
  for (int i = 32; i < 96; ++i) EXPECT_TRUE(std::isnan(back.data_as<float>()[i]));
}

TEST(Mxfp4, AllZeroBlockGetsScaleZeroAndKeepsSigns) {
  Tensor w(DType::f32, {1, 32}), p(DType::u8, {1, 16}), s(DType::u8, {1, 1});
  w.data_as<float>()[1] = -0.f;
  s.data_as<uint8_t>()[0] = 99;
  mxfp4_quant(w, p, s);
  EXPECT_EQ(s.data_as<uint8_t>()[0], 0);
  EXPECT_EQ(p.data_as<uint8_t>()[0], 0x80);  // col 1 is -0: code 8
}

// quant(dequant(p, s)) == (p, s) exactly when every block's largest magnitude code is 4 or 6 (then
// floor(log2(amax)) - 2 recovers e) and the values are finite in w's dtype. For any other block the
// VALUES still round-trip (the smaller scale represents them all), but the codes and scale change.
void round_trip(DType dt, int e_lo, int e_hi, bool force_top, uint64_t seed) {
  const int64_t o = 7, i = 256;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> code(0, 15), top(6, 7), sgn(0, 1), pos(0, 31), ex(e_lo, e_hi);
  std::vector<int> c(static_cast<size_t>(o * i));
  for (auto& v : c) v = code(rng);
  Tensor p(DType::u8, {o, i / 2}), s(DType::u8, {o, i / 32}), w(dt, {o, i});
  for (int64_t b = 0; b < o * i / 32; ++b) {
    s.data_as<uint8_t>()[b] = uint8_t(ex(rng));
    if (force_top) c[size_t(b * 32 + pos(rng))] = top(rng) | (sgn(rng) ? 8 : 0);
  }
  for (int64_t j = 0; j < o * i / 2; ++j) p.data_as<uint8_t>()[j] = uint8_t(c[size_t(2 * j)] | (c[size_t(2 * j + 1)] << 4));
  mxfp4_dequant(p, s, w);
  Tensor p2(DType::u8, {o, i / 2}), s2(DType::u8, {o, i / 32}), w2(dt, {o, i});
  mxfp4_quant(w, p2, s2);
  mxfp4_dequant(p2, s2, w2);
  const auto a = as_floats(w), b = as_floats(w2);
  for (size_t j = 0; j < a.size(); ++j) {
    ASSERT_TRUE(std::isfinite(a[j]));
    ASSERT_EQ(a[j], b[j]) << "value " << j;
    ASSERT_EQ(std::signbit(a[j]), std::signbit(b[j])) << "value " << j;
  }
  if (force_top) {
    EXPECT_EQ(std::memcmp(p.data(), p2.data(), p.nbytes()), 0);
    EXPECT_EQ(std::memcmp(s.data(), s2.data(), s.nbytes()), 0);
  }
}

TEST(Mxfp4, RoundTripIsExactWhenEveryBlockHoldsMagnitude4Or6) {
  round_trip(DType::f32, 0, 252, true, 1);  // e = 253, 254 overflow f32 with magnitudes >= 4 (6 * 2^126 > FLT_MAX)
  round_trip(DType::bf16, 0, 252, true, 2);
  round_trip(DType::f16, 113, 140, true, 3);  // f16: 6 * 2^13 <= 65504 and 0.5 * 2^-14 is a normal f16
}

TEST(Mxfp4, RoundTripKeepsValuesForAnyCodes) {
  round_trip(DType::f32, 0, 252, false, 4);
  round_trip(DType::bf16, 100, 150, false, 5);
}

// The format's bound: with s = 2^(e-127) and amax in [4s, 8s), every in-range value (|v| <= 6s) is off
// by at most half a grid step (<= s <= amax/4), a saturated one by amax - 6s < 2s <= amax/4. Values
// with |v| >= s are within 1/4 relative (1/5 below 6s, < 1/4 when saturated).
TEST(Mxfp4, QuantErrorBound) {
  const int64_t o = 16, i = 512;
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> u(-1, 1);
  std::uniform_int_distribution<int> ex(-20, 20);
  Tensor w(DType::f32, {o, i}), p(DType::u8, {o, i / 2}), s(DType::u8, {o, i / 32}), back(DType::f32, {o, i});
  float* v = w.data_as<float>();
  for (int64_t b = 0; b < o * i / 32; ++b) {
    const int e = ex(rng);
    for (int j = 0; j < 32; ++j) v[b * 32 + j] = float(u(rng) * std::ldexp(1.0, e));
  }
  mxfp4_quant(w, p, s);
  mxfp4_dequant(p, s, back);
  double worst_abs = 0, worst_rel = 0;
  for (int64_t b = 0; b < o * i / 32; ++b) {
    double amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(double(v[b * 32 + j])));
    const double sc = std::ldexp(1.0, int(s.data_as<uint8_t>()[b]) - 127);
    EXPECT_GE(amax, 4 * sc);
    EXPECT_LT(amax, 8 * sc);
    for (int j = 0; j < 32; ++j) {
      const double x = v[b * 32 + j], err = std::fabs(double(back.data_as<float>()[b * 32 + j]) - x);
      worst_abs = std::max(worst_abs, err / amax);
      if (std::fabs(x) >= sc) worst_rel = std::max(worst_rel, err / std::fabs(x));
    }
  }
  EXPECT_LE(worst_abs, 0.25);
  EXPECT_LE(worst_rel, 0.25);
  EXPECT_GT(worst_abs, 0.15);  // the bound is nearly reached (saturation just below 8s)
}

TEST(Mxfp4, TiesGoToTheEvenCode) {
  // amax 6 fixes the scale at 1; then 0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4,
  // 7 -> 6 (saturated), and 5.0001 -> 6.
  const float in[10] = {6.f, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.f, 7.f, 5.0001f};
  const int code[10] = {7, 0, 2, 2, 4, 4, 6, 6, 7, 7};
  Tensor w(DType::f32, {1, 32}), p(DType::u8, {1, 16}), s(DType::u8, {1, 1});
  for (int j = 0; j < 10; ++j) w.data_as<float>()[j] = -in[j];
  mxfp4_quant(w, p, s);
  EXPECT_EQ(s.data_as<uint8_t>()[0], 127);
  for (int j = 0; j < 10; ++j) {
    const uint8_t byte = p.data_as<uint8_t>()[j / 2];
    EXPECT_EQ(j % 2 ? byte >> 4 : byte & 15, code[j] | 8) << "value " << in[j];
  }
}

}  // namespace
}  // namespace kimi
