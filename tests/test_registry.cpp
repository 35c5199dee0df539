// The operator registry (src/core/registry.h): what op_supported / all_ops read from it, and how dispatch()
// turns a missing kernel or a backend's refusal into the operator's error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "core/registry.h"
#include "expect_error.h"
#include "kimi/device.h"

namespace kimi {
namespace {

TEST(Registry, AllOpsAreThePublicSlotsInDeclarationOrder) {
  const std::vector<std::string>& ops = all_ops();
  ASSERT_EQ(ops.size(), 27u);
  EXPECT_EQ(ops.front(), "rms_norm");
  EXPECT_EQ(ops.back(), "sample_tokens");
  EXPECT_NE(std::find(ops.begin(), ops.end(), "kda_decode_step"), ops.end());
  // internal kernels of the runtime are slots but not operators of the public API
  EXPECT_NE(registry().find("add_into"), nullptr);
  EXPECT_EQ(std::find(ops.begin(), ops.end(), "add_into"), ops.end());
}

TEST(Registry, TheCpuBackendImplementsEveryOperator) {
  EXPECT_TRUE(registry().linked(Backend::cpu));
  for (const std::string& op : all_ops()) EXPECT_TRUE(op_supported(op, Device::cpu())) << op;
  EXPECT_TRUE(op_supported("rms_norm", Device{DeviceType::cpu, 1}));  // any host "device": the CPU backend
  EXPECT_FALSE(op_supported("add_into", Device::cpu()));              // internal: not an operator
  EXPECT_FALSE(op_supported("no_such_op", Device::cpu()));
}

TEST(Registry, CudaSupportIsWhatTheCudaBackendRegistered) {
  EXPECT_EQ(registry().linked(Backend::cuda), cuda_built());
  for (const std::string& op : all_ops()) {
    // every operator has a CUDA kernel except the host-side statistic moe_quantile_balance
    const bool expected = cuda_built() && op != "moe_quantile_balance";
    EXPECT_EQ(op_supported(op, Device::cuda(0)), expected) << op;
  }
}

// A private registry: the slots as the backends see them, filled here with fakes.
int g_calls = 0;
float g_eps = 0.f;
void fake_l2_norm(TensorView, TensorView, float eps, const Context&) {
  ++g_calls;
  g_eps = eps;
}
std::optional<Refusal> refuse_negative_zero(TensorView, TensorView, float eps, const Context&) {
  if (eps == 0.f && std::signbit(eps)) return Refusal{"eps", "+0 on this backend", "-0"};
  return std::nullopt;
}

TEST(Registry, DispatchRunsTheFunctionOfTheDevicesBackend) {
  Registry r;
  ASSERT_EQ(r.slots().size(), all_ops().size() + 1);  // + add_into
  EXPECT_FALSE(r.l2_norm.has(Backend::cpu));
  r.l2_norm.set(Backend::cpu, fake_l2_norm, refuse_negative_zero);
  EXPECT_TRUE(r.l2_norm.has(Backend::cpu));
  EXPECT_FALSE(r.l2_norm.has(Backend::cuda));
  g_calls = 0;
  dispatch(check::Checker("l2_norm"), Device::cpu(), r.l2_norm, TensorView{}, TensorView{}, 0.5f, Context{});
  EXPECT_EQ(g_calls, 1);
  EXPECT_EQ(g_eps, 0.5f);
  // supports() refuses: the operator's error, in Checker::fail's words, and the function never runs
  EXPECT_KIMI_ERROR(
      dispatch(check::Checker("l2_norm"), Device::cpu(), r.l2_norm, TensorView{}, TensorView{}, -0.f, Context{}),
      "l2_norm: argument 'eps': expected +0 on this backend, got -0");
  EXPECT_EQ(g_calls, 1);
}

TEST(Registry, AnEmptySlotIsRefusedByName) {
  Registry r;  // nothing registered
  EXPECT_KIMI_ERROR(
      dispatch(check::Checker("l2_norm"), Device::cpu(), r.l2_norm, TensorView{}, TensorView{}, 0.f, Context{}),
      "l2_norm: not implemented on the cpu backend yet");
  // on CUDA: the build has no CUDA backend, or (with one) this registry's slot is empty
  EXPECT_KIMI_ERROR(
      dispatch(check::Checker("l2_norm"), Device::cuda(1), r.l2_norm, TensorView{}, TensorView{}, 0.f, Context{}),
      cuda_built() ? "l2_norm: not implemented on the cuda:1 backend yet"
                   : "l2_norm: tensors are on cuda:1 but this build of kimi.cpp has no CUDA backend (configure with "
                     "-DKIMI_CUDA=ON)");
}

}  // namespace
}  // namespace kimi
