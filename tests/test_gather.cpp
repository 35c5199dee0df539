// Bad-input tests for kimi/ops/gather.h (values are covered by the harness, src/verify/cases/cases_gather.cpp).
#include <gtest/gtest.h>

#include "expect_error.h"
#include "kimi/ops/gather.h"

namespace kimi {
namespace {

Tensor index(std::initializer_list<int64_t> v) {
  Tensor t(DType::i64, {int64_t(v.size())});
  int64_t i = 0;
  for (int64_t x : v) t.data_as<int64_t>()[i++] = x;
  return t;
}

TEST(Gather, RejectsBadArguments) {
  Tensor src(DType::bf16, {10, 8}), out(DType::f32, {3, 8}), out7(DType::f32, {3, 7});
  const Tensor rows = index({0, 9, 4});
  EXPECT_NO_THROW(gather_rows(src, rows, out));
  EXPECT_KIMI_ERROR(gather_rows(src, index({0, 10, 1}), out), "gather_rows", "'rows'", "[0, 10)", "rows[1] = 10");
  EXPECT_KIMI_ERROR(gather_rows(src, index({-1, 0, 1}), out), "gather_rows", "'rows'", "rows[0] = -1");
  EXPECT_KIMI_ERROR(gather_rows(src, rows, out7), "gather_rows", "'out'", "[3, 8]", "[3, 7]");
  EXPECT_KIMI_ERROR(gather_rows(src, index({0, 1}), out), "gather_rows", "'out'", "[2, 8]", "[3, 8]");
  Tensor f(DType::f32, {3}), i8(DType::u8, {10, 8});
  EXPECT_KIMI_ERROR(gather_rows(src, f, out), "gather_rows", "'rows'", "i32/i64", "f32");
  EXPECT_KIMI_ERROR(gather_rows(i8, rows, out), "gather_rows", "'src'", "u8");
  EXPECT_KIMI_ERROR(gather_rows(src.view().transpose(0, 1), index({0}), Tensor(DType::f32, {1, 10})), "'src'",
                    "stride 1");
  EXPECT_KIMI_ERROR(gather_rows(TensorView{}, rows, out), "gather_rows", "'src'");
  // rows stay on the host (the API's index tensors); src and out on one device
  TensorView rows_gpu = rows.view();
  rows_gpu.device = Device::cuda(0);
  EXPECT_KIMI_ERROR(gather_rows(src, rows_gpu, out), "gather_rows", "'rows'", "host", "cuda:0");
  TensorView out_gpu = out.view();
  out_gpu.device = Device::cuda(0);
  EXPECT_KIMI_ERROR(gather_rows(src, rows, out_gpu), "gather_rows", "'out'", "cuda:0");
  // out must not overlap src (the rows would change while they are read)
  Tensor a(DType::f32, {4, 8});
  EXPECT_KIMI_ERROR(gather_rows(a, index({0, 1}), a.view().slice(0, 2, 4)), "gather_rows", "'out'", "disjoint");
}

TEST(Gather, SelectsRowsExactly) {
  Tensor src(DType::f32, {4, 3}), out(DType::f32, {5, 3});
  for (int64_t i = 0; i < 12; ++i) src.data_as<float>()[i] = float(i);
  gather_rows(src, index({3, 0, 3, 1, 2}), out);
  const float want[15] = {9, 10, 11, 0, 1, 2, 9, 10, 11, 3, 4, 5, 6, 7, 8};
  for (int64_t i = 0; i < 15; ++i) EXPECT_EQ(out.data_as<float>()[i], want[i]) << i;
  Tensor none(DType::f32, {0, 3});
  EXPECT_NO_THROW(gather_rows(src, Tensor(DType::i32, {0}), none));
}

}  // namespace
}  // namespace kimi
