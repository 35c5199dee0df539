// Bad-input tests for kimi/ops/norm.h (values are covered by the harness).
#include <gtest/gtest.h>

#include "expect_error.h"
#include "kimi/ops/norm.h"

namespace kimi {
namespace {

TEST(Norm, RejectsBadArguments) {
  Tensor x(DType::f32, {4, 8}), w(DType::f32, {8}), y(DType::f32, {4, 8}), w7(DType::f32, {7});
  Tensor y5(DType::f32, {5, 8}), xi(DType::i32, {4, 8});
  EXPECT_KIMI_ERROR(rms_norm(x, w7, 1e-5f, y), "rms_norm", "'w'", "[8]", "[7]");
  EXPECT_KIMI_ERROR(rms_norm(x, w, 1e-5f, y5), "rms_norm", "'y'", "[4, 8]", "[5, 8]");
  EXPECT_KIMI_ERROR(rms_norm(xi, w, 1e-5f, y), "'x'", "f32/bf16/f16", "i32");
  EXPECT_KIMI_ERROR(rms_norm(TensorView{}, w, 1e-5f, y), "'x'", "none");
  EXPECT_KIMI_ERROR(rms_norm(x, w, -1.f, y), "'eps'", ">= 0");
  EXPECT_KIMI_ERROR(rms_norm(x.view().transpose(0, 1), w, 1e-5f, y), "'x'", "stride 1");
  TensorView xg = x.view();
  xg.device = Device::cuda(0);
  EXPECT_KIMI_ERROR(rms_norm(xg, w, 1e-5f, y), "'w'", "cuda:0", "cpu");
#ifndef KIMI_WITH_CUDA
  // A build without the CUDA backend names the operator and the device (never falls back to the CPU).
  TensorView yg = y.view();
  yg.device = Device::cuda(0);
  EXPECT_KIMI_ERROR(l2_norm(xg, yg), "l2_norm", "no CUDA backend", "cuda:0");
#endif
  EXPECT_KIMI_ERROR(l2_norm(x, y5), "l2_norm", "'y'");
  EXPECT_KIMI_ERROR(gated_rms_norm(x, y5, w, 1e-5f, y), "gated_rms_norm", "'z'", "[4, 8]", "[5, 8]");
  EXPECT_KIMI_ERROR(add_rms_norm(x, y5, w, 1e-5f, y, y), "add_rms_norm", "'residual'");
}

TEST(Norm, RejectsNegativeExtents) {
  Tensor x(DType::f32, {4, 8}), w(DType::f32, {8}), y(DType::f32, {4, 8});
  TensorView bad = x.view();
  bad.shape[0] = -4;
  EXPECT_KIMI_ERROR(rms_norm(bad, w, 1e-5f, y), "rms_norm", "'x'", "non-negative sizes", "[-4, 8]");
}

TEST(Norm, EmptyRowsAreANoOp) {
  Tensor x(DType::f32, {0, 8}), w(DType::f32, {8}), y(DType::f32, {0, 8});
  EXPECT_NO_THROW(rms_norm(x, w, 1e-5f, y));
}

}  // namespace
}  // namespace kimi
