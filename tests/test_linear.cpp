// kimi/ops/linear.h: bad input and properties the harness cannot express (decode rows agree with the
// same rows of a prefill batch, beta = 0 ignores y, K = 0, empty M).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "expect_error.h"
#include "cpu/linear.h"
#include "kimi/ops/linear.h"
#include "kimi/ops/mxfp4.h"
#include "verify/oracle/mxfp4.h"

namespace kimi {
namespace {

TEST(Linear, RejectsBadArguments) {
  Tensor x(DType::f32, {3, 64}), w(DType::bf16, {5, 64}), y(DType::f32, {3, 5});
  Tensor p(DType::u8, {5, 32}), s(DType::u8, {5, 2});
  EXPECT_NO_THROW(linear(x, Weight{w, {}}, y));
  EXPECT_NO_THROW(linear(x, Weight{p, s}, y));
  Tensor x3(DType::f32, {1, 3, 64}), xi(DType::i32, {3, 64}), w63(DType::f32, {5, 63}), wi(DType::i32, {5, 64});
  EXPECT_KIMI_ERROR(linear(x3, Weight{w, {}}, y), "linear", "'x'", "2 dimensions", "3");
  EXPECT_KIMI_ERROR(linear(xi, Weight{w, {}}, y), "linear", "'x'", "f32/bf16/f16", "i32");
  EXPECT_KIMI_ERROR(linear(x, Weight{w63, {}}, y), "linear", "'w.w'", "[?, 64]", "[5, 63]");
  EXPECT_KIMI_ERROR(linear(x, Weight{wi, {}}, y), "linear", "'w.w'", "f32/bf16/f16", "i32");
  EXPECT_KIMI_ERROR(linear(x, Weight{w.view().transpose(0, 1), {}}, y), "'w.w'", "stride 1");
  EXPECT_KIMI_ERROR(linear(x.view().transpose(0, 1), Weight{w, {}}, y), "'x'");
  // MXFP4: packed dtype, packed width vs K, scale shape, K not a multiple of 32.
  Tensor pf(DType::f32, {5, 32}), p31(DType::u8, {5, 31}), s3(DType::u8, {5, 3}), s4(DType::u8, {4, 2});
  EXPECT_KIMI_ERROR(linear(x, Weight{pf, s}, y), "linear", "'w.w'", "u8", "f32");
  EXPECT_KIMI_ERROR(linear(x, Weight{p, s3}, y), "linear", "'w.scale'", "[5, 2]", "[5, 3]");
  EXPECT_KIMI_ERROR(linear(x, Weight{p, s4}, y), "linear", "'w.scale'", "[5, 2]", "[4, 2]");
  Tensor x62(DType::f32, {3, 62});
  EXPECT_KIMI_ERROR(linear(x62, Weight{p31, s}, y), "linear", "'w.w'", "divisible by 32", "62");
  EXPECT_KIMI_ERROR(linear(x, Weight{p31, s}, y), "linear", "'w.w'", "divisible by 32", "62");
  Tensor x96(DType::f32, {3, 96});
  EXPECT_KIMI_ERROR(linear(x96, Weight{p, s}, y), "linear", "'w.w'", "[?, 48]", "[5, 32]");
  Tensor su(DType::f32, {5, 2});
  EXPECT_KIMI_ERROR(linear(x, Weight{p, su}, y), "linear", "'w.scale'", "u8", "f32");
  // y: shape, dtype, overlapping rows; beta.
  Tensor y4(DType::f32, {3, 4}), yi(DType::i64, {3, 5});
  EXPECT_KIMI_ERROR(linear(x, Weight{w, {}}, y4), "linear", "'y'", "[3, 5]", "[3, 4]");
  EXPECT_KIMI_ERROR(linear(x, Weight{w, {}}, yi), "linear", "'y'", "f32/bf16/f16", "i64");
  int64_t shp[] = {3, 5}, str[] = {2, 1};
  EXPECT_KIMI_ERROR(linear(x, Weight{w, {}}, TensorView(y.data(), DType::f32, shp, str)), "linear", "'y'",
                    "non-overlapping", "stride(0) 2");
  EXPECT_KIMI_ERROR(linear(x, Weight{w, {}}, y, 0.5f), "linear", "'beta'", "0 or 1", "0.5");
  EXPECT_KIMI_ERROR(linear(x, Weight{w, {}}, y, NAN), "linear", "'beta'", "0 or 1");
  TensorView wg = w.view();
  wg.device = Device::cuda(0);
  EXPECT_KIMI_ERROR(linear(x, Weight{wg, {}}, y), "linear", "'w.w'", "cuda:0", "cpu");
}

// A decode call (M = 1) and the same row inside a prefill batch (M = 256) run different kernels (a one-row
// tile vs four-row tiles, or sgemm when OpenBLAS is fast); both are fp32 and must agree far below the f32
// tolerance.
TEST(Linear, DecodeRowsMatchPrefillRows) {
  const int64_t m = 256, n = 300, k = 2304;
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::uniform_int_distribution<int> byte(0, 255), ex(118, 124);
  for (int kind = 0; kind < 4; ++kind) {  // f32, bf16, f16, mxfp4 weights
    const DType wt = kind == 0 ? DType::f32 : kind == 1 ? DType::bf16 : DType::f16;
    Tensor x(DType::f32, {m, k}), wd(wt, {n, k}), p(DType::u8, {n, k / 2}), s(DType::u8, {n, k / 32});
    for (int64_t i = 0; i < m * k; ++i) x.data_as<float>()[i] = u(rng);
    for (int64_t i = 0; i < n * k; ++i) store_from_f32(wd.data(), wt, i, u(rng) / 48);
    for (int64_t i = 0; i < n * k / 2; ++i) p.data_as<uint8_t>()[i] = uint8_t(byte(rng));
    for (int64_t i = 0; i < n * k / 32; ++i) s.data_as<uint8_t>()[i] = uint8_t(ex(rng));
    const Weight w = kind == 3 ? Weight{p, s} : Weight{wd, {}};
    Tensor y(DType::f32, {m, n});
    linear(x, w, y);
    for (int64_t r : {0L, 77L, 255L}) {
      Tensor y1(DType::f32, {1, n});
      linear(x.view().slice(0, r, r + 1), w, y1);
      double num = 0, den = 0;
      for (int64_t j = 0; j < n; ++j) {
        const double a = y1.data_as<float>()[j], b = y.data_as<float>()[r * n + j];
        num += (a - b) * (a - b);
        den += b * b;
      }
      EXPECT_LE(std::sqrt(num / den), 1e-6) << "weights " << kind << " row " << r;
    }
  }
}

// Every CPU path (fused dot products, sgemm panels, AVX2 tiles) against a plain double product, on shapes
// that hit every tail: M not a multiple of 4, N not a multiple of 3 or of the row blocks, K not a
// multiple of 8; strided x and y, bf16 x, beta 0 and 1.
TEST(Linear, EveryCpuPathMatchesAPlainProduct) {
  using cpu::LinearPath;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  std::uniform_int_distribution<int> byte(0, 255), ex(120, 128);
  for (int kind = 0; kind < 4; ++kind) {
    const DType wt = kind == 0 ? DType::f32 : kind == 1 ? DType::bf16 : DType::f16;
    const int64_t k = kind == 3 ? 96 : 77, n = 31;
    Tensor wd(wt, {n, k}), p(DType::u8, {n, k / 2}), s(DType::u8, {n, std::max<int64_t>(k / 32, 1)});
    for (int64_t i = 0; i < n * k; ++i) store_from_f32(wd.data(), wt, i, u(rng));
    for (int64_t i = 0; i < n * k / 2; ++i) p.data_as<uint8_t>()[i] = uint8_t(byte(rng));
    for (int64_t i = 0; i < n * (k / 32); ++i) s.data_as<uint8_t>()[i] = uint8_t(ex(rng));
    const Weight w = kind == 3 ? Weight{p, s} : Weight{wd, {}};
    // The weights in fp64: stored dense values, or the oracle's MXFP4 decode.
    std::vector<double> wf(static_cast<size_t>(n * k));
    if (kind == 3) {
      const std::vector<uint8_t> pb(p.data_as<uint8_t>(), p.data_as<uint8_t>() + n * k / 2);
      const std::vector<int> sv(s.data_as<uint8_t>(), s.data_as<uint8_t>() + n * k / 32);
      wf = oracle::mxfp4_decode(oracle::unpack_codes(pb, n, k), sv, n, k);
    } else {
      for (int64_t i = 0; i < n * k; ++i) wf[size_t(i)] = load_as_f32(wd.data(), wt, i);
    }
    for (int64_t m : {1, 5, 17}) {
      for (float beta : {0.f, 1.f}) {
        for (LinearPath path : {LinearPath::automatic, LinearPath::fused, LinearPath::panels, LinearPath::tiles}) {
          Tensor xb(kind == 1 ? DType::bf16 : DType::f32, {m, k + 3}), yb(DType::f32, {m, n + 2});
          for (int64_t i = 0; i < m * (k + 3); ++i) store_from_f32(xb.data(), xb.view().dtype, i, u(rng));
          for (int64_t i = 0; i < m * (n + 2); ++i) yb.data_as<float>()[i] = u(rng);
          const TensorView x = xb.view().slice(1, 0, k), y = yb.view().slice(1, 1, n + 1);
          std::vector<double> ref(static_cast<size_t>(m * n));
          for (int64_t i = 0; i < m; ++i)
            for (int64_t r = 0; r < n; ++r) {
              double a = beta != 0.f ? yb.data_as<float>()[i * (n + 2) + 1 + r] : 0.0;
              for (int64_t c = 0; c < k; ++c) a += double(load_as_f32(xb.data(), xb.view().dtype, i * (k + 3) + c)) * wf[size_t(r * k + c)];
              ref[size_t(i * n + r)] = a;
            }
          cpu::linear_path(x, w, y, beta, {}, path);
          double num = 0, den = 0;
          for (int64_t i = 0; i < m; ++i)
            for (int64_t r = 0; r < n; ++r) {
              const double d = yb.data_as<float>()[i * (n + 2) + 1 + r] - ref[size_t(i * n + r)];
              num += d * d;
              den += ref[size_t(i * n + r)] * ref[size_t(i * n + r)];
            }
          EXPECT_LE(std::sqrt(num / den), 1e-6) << "weights " << kind << " M " << m << " beta " << beta << " path "
                                                << int(path);
        }
      }
    }
  }
}

// Every path decodes the weights exactly as mxfp4_dequant does (the SIMD loaders are separate code from
// cpu::mxfp4_decode_row): with x = the identity, y[j, r] = 1 * W[r, j] + zeros = W[r, j] exactly.
TEST(Linear, KernelsDecodeWeightsExactly) {
  using cpu::LinearPath;
  const int64_t n = 7, k = 64;
  std::mt19937_64 rng(8);
  std::uniform_int_distribution<int> byte(0, 255), ex(0, 252);  // 253, 254 overflow f32 with magnitudes >= 2
  Tensor p(DType::u8, {n, k / 2}), s(DType::u8, {n, k / 32}), wref(DType::f32, {n, k}), eye(DType::f32, {k, k});
  for (int64_t i = 0; i < n * k / 2; ++i) p.data_as<uint8_t>()[i] = uint8_t(byte(rng));
  for (int64_t i = 0; i < n * k / 32; ++i) s.data_as<uint8_t>()[i] = uint8_t(ex(rng));
  for (int64_t i = 0; i < k; ++i) eye.data_as<float>()[i * k + i] = 1.f;
  mxfp4_dequant(p, s, wref);
  Tensor wb(DType::bf16, {n, k}), wh(DType::f16, {n, k});
  for (int64_t i = 0; i < n * k; ++i) {
    // Finite patterns only (0 * Inf would spread NaN over the other columns): exponent never all ones.
    wb.data_as<uint16_t>()[i] = uint16_t(byte(rng) | ((byte(rng) & 0xbf) << 8));
    wh.data_as<uint16_t>()[i] = uint16_t(byte(rng) | ((byte(rng) & 0xbf) << 8));
  }
  for (LinearPath path : {LinearPath::fused, LinearPath::panels, LinearPath::tiles}) {
    for (int kind = 0; kind < 3; ++kind) {
      const Weight w = kind == 0 ? Weight{p, s} : Weight{kind == 1 ? wb : wh, {}};
      Tensor y(DType::f32, {k, n});
      cpu::linear_path(eye, w, y, 0.f, {}, path);
      for (int64_t j = 0; j < k; ++j)
        for (int64_t r = 0; r < n; ++r) {
          const float want = kind == 0 ? wref.data_as<float>()[r * k + j] : load_as_f32(w.w.data, w.w.dtype, r * k + j);
          ASSERT_EQ(y.data_as<float>()[j * n + r], want) << "kind " << kind << " path " << int(path) << " W[" << r << ", " << j << "]";
        }
    }
  }
}

// With beta = 0, y is overwritten: NaN already in y must not leak (0 * NaN would).
TEST(Linear, BetaZeroIgnoresOldY) {
  for (int64_t m : {1, 2, 64}) {
    Tensor x(DType::bf16, {m, 64}), w(DType::f32, {9, 64}), y(DType::f32, {m, 9});
    for (int64_t i = 0; i < m * 9; ++i) y.data_as<float>()[i] = NAN;
    linear(x, Weight{w, {}}, y);
    for (int64_t i = 0; i < m * 9; ++i) EXPECT_EQ(y.data_as<float>()[i], 0.f);
  }
}

TEST(Linear, BetaOneAccumulates) {
  for (int64_t m : {1, 3, 40}) {
    Tensor x(DType::f32, {m, 32}), p(DType::u8, {5, 16}), s(DType::u8, {5, 1}), y(DType::bf16, {m, 5});
    for (int64_t i = 0; i < m * 32; ++i) x.data_as<float>()[i] = 1.f;
    for (int64_t i = 0; i < 5 * 16; ++i) p.data_as<uint8_t>()[i] = 0x22;  // every weight 1
    for (int64_t i = 0; i < 5; ++i) s.data_as<uint8_t>()[i] = 127;
    for (int64_t i = 0; i < m * 5; ++i) store_from_f32(y.data(), DType::bf16, i, 0.5f);
    linear(x, Weight{p, s}, y, 1.f);
    linear(x, Weight{p, s}, y, 1.f);
    for (int64_t i = 0; i < m * 5; ++i) EXPECT_EQ(load_as_f32(y.data(), DType::bf16, i), 64.5f);
  }
}

TEST(Linear, EmptyShapes) {
  Tensor x0(DType::f32, {0, 8}), w(DType::f32, {4, 8}), y0(DType::f32, {0, 4});
  EXPECT_NO_THROW(linear(x0, Weight{w, {}}, y0));
  // K = 0: the product is an empty sum, y = 0 (beta 0) or unchanged (beta 1).
  Tensor xk(DType::f32, {2, 0}), wk(DType::f32, {4, 0}), yk(DType::f32, {2, 4});
  for (int i = 0; i < 8; ++i) yk.data_as<float>()[i] = 3.f;
  linear(xk, Weight{wk, {}}, yk, 1.f);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(yk.data_as<float>()[i], 3.f);
  linear(xk, Weight{wk, {}}, yk);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(yk.data_as<float>()[i], 0.f);
}

}  // namespace
}  // namespace kimi

namespace kimi {
namespace {
// An MXFP4 weight whose packed width holds in/2 rounded down must not pass for an odd input width.
TEST(LinearMxfp4, RejectsOddInputWidth) {
  Tensor x(DType::f32, {2, 65}), packed(DType::u8, {4, 32}), scale(DType::u8, {4, 2}), y(DType::f32, {2, 4});
  EXPECT_KIMI_ERROR(linear(x, Weight{packed, scale}, y), "linear", "'w.w'", "65 input features", "64 input features");
}
}  // namespace
}  // namespace kimi

namespace kimi {
namespace {
// The fused path reads x rows after writing y rows: an in-place or overlapping y is refused.
TEST(Linear, RejectsOutputOverlappingInput) {
  Tensor buf(DType::f32, {4, 16}), w(DType::f32, {16, 16});
  const TensorView all = buf.view();
  EXPECT_KIMI_ERROR(linear(all, Weight{w, {}}, all), "linear", "'y'", "disjoint from 'x'");
  const TensorView x = all.slice(0, 0, 3), y = all.slice(0, 1, 4);  // rows 0-2 and 1-3 of one buffer
  EXPECT_KIMI_ERROR(linear(x, Weight{w, {}}, y), "linear", "'y'", "disjoint from 'x'");
}
}  // namespace
}  // namespace kimi
