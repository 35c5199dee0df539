// fill_random (kimi/ops/random.h): bad input, determinism, the mapping's ranges, and CPU vs CUDA bit for bit.
// (Its values against the fp64 oracle: the harness cases, src/verify/cases/cases_random.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cuda_tests.h"
#include "expect_error.h"
#include "kimi/device.h"
#include "kimi/ops/random.h"

namespace kimi {
namespace {

std::vector<uint8_t> bytes_of(const Tensor& t) {
  Tensor host(t.view().dtype, std::span<const int64_t>(t.view().shape.data(), size_t(t.view().ndim)));
  copy(host, t);
  const uint8_t* p = static_cast<const uint8_t*>(host.data());
  return {p, p + host.nbytes()};
}

TEST(FillRandom, RefusesBadArguments) {
  Tensor f16(DType::f16, {4}), i64(DType::i64, {4}), f32(DType::f32, {4, 6}), u8(DType::u8, {8}), i32(DType::i32, {2});
  EXPECT_KIMI_ERROR(fill_random(f16, 1, 0, 1), "fill_random", "'t'", "expected dtype f32/bf16/u8/i32", "got f16");
  EXPECT_KIMI_ERROR(fill_random(i64, 1, 0, 1), "fill_random", "'t'", "dtype f32/bf16/u8/i32", "got i64");
  EXPECT_KIMI_ERROR(fill_random(TensorView{}, 1, 0, 1), "fill_random", "'t'", "a tensor", "none (null data)");
  EXPECT_KIMI_ERROR(fill_random(f32.view().transpose(0, 1), 1, 0, 1), "fill_random", "'t'", "contiguous");
  EXPECT_KIMI_ERROR(fill_random(f32, 1, 1, 0), "fill_random", "'hi'", "expected >= lo = 1", "got 0");
  EXPECT_KIMI_ERROR(fill_random(f32, 1, -INFINITY, 0), "fill_random", "'lo'", "a finite value", "got -inf");
  EXPECT_KIMI_ERROR(fill_random(f32, 1, 0, NAN), "fill_random", "'hi'", "a finite value", "got nan");
  EXPECT_KIMI_ERROR(fill_random(f32, 1, -3e38, 3e38), "fill_random", "'hi'", "hi - lo finite in f32", "got 3e+38");
  EXPECT_KIMI_ERROR(fill_random(u8, 1, 0, 256), "fill_random", "'hi'", "an integer in [0, 255] (the range of u8)", "got 256");
  EXPECT_KIMI_ERROR(fill_random(u8, 1, 0.5, 3), "fill_random", "'lo'", "an integer in [0, 255]", "got 0.5");
  EXPECT_KIMI_ERROR(fill_random(i32, 1, -2147483649.0, 0), "fill_random", "'lo'",
                    "an integer in [-2147483648, 2147483647] (the range of i32)", "got -2147483649");
  // nothing was written by the refused calls (Tensors start zeroed)
  for (uint8_t b : bytes_of(f32)) EXPECT_EQ(b, 0);
}

TEST(FillRandom, SameSeedSameValuesOtherSeedOthers) {
  Tensor a(DType::bf16, {33, 17}), b(DType::bf16, {33, 17}), c(DType::bf16, {33, 17});
  fill_random(a, 42, -1, 1);
  fill_random(b, 42, -1, 1);
  fill_random(c, 43, -1, 1);
  EXPECT_EQ(bytes_of(a), bytes_of(b));
  EXPECT_NE(bytes_of(a), bytes_of(c));
  // element i does not depend on the tensor's size: a shorter fill is a prefix of a longer one
  Tensor head(DType::bf16, {100});
  fill_random(head, 42, -1, 1);
  const std::vector<uint8_t> all = bytes_of(a), part = bytes_of(head);
  EXPECT_TRUE(std::equal(part.begin(), part.end(), all.begin()));
  // the thread count does not change the values
  Context one;
  one.cpu_threads = 1;
  fill_random(b, 42, -1, 1, one);
  EXPECT_EQ(bytes_of(a), bytes_of(b));
}

TEST(FillRandom, ValuesCoverTheRange) {
  Tensor f(DType::f32, {20000}), u(DType::u8, {20000});
  fill_random(f, 5, 0.9, 1.1);
  fill_random(u, 5, 126, 127);
  const float* p = f.data_as<float>();
  double sum = 0;
  for (int64_t i = 0; i < f.numel(); ++i) {
    ASSERT_GE(p[i], 0.9f);
    ASSERT_LE(p[i], 1.1f);
    sum += p[i];
  }
  EXPECT_NEAR(sum / double(f.numel()), 1.0, 0.005);  // mean of U[0.9, 1.1]: 1 +- 0.058 / sqrt(20000) * 4
  int64_t low = 0;
  for (int64_t i = 0; i < u.numel(); ++i) {
    const uint8_t v = u.data_as<uint8_t>()[i];
    ASSERT_TRUE(v == 126 || v == 127) << int(v);
    low += v == 126;
  }
  EXPECT_NEAR(double(low) / double(u.numel()), 0.5, 0.02);
  Tensor empty(DType::f32, {0});
  fill_random(empty, 1, 0, 1);  // nothing to do
}

#ifdef KIMI_WITH_CUDA
TEST(FillRandom, CudaFillsTheSameBitsAsTheCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  struct Fill {
    DType dtype;
    int64_t n;
    double lo, hi;
  };
  for (const Fill f : {Fill{DType::bf16, 1 << 20, -0.02, 0.02}, Fill{DType::f32, 100003, -0.5, 0.5},
                       Fill{DType::u8, 70001, 0, 255}, Fill{DType::i32, 5000, -2147483648.0, 2147483647.0}}) {
    Tensor cpu(f.dtype, {f.n}), gpu(f.dtype, {f.n}, Device::cuda(0));
    fill_random(cpu, 99, f.lo, f.hi);
    fill_random(gpu, 99, f.lo, f.hi);
    EXPECT_EQ(bytes_of(cpu), bytes_of(gpu)) << dtype_name(f.dtype);
  }
}
#endif

}  // namespace
}  // namespace kimi
