// tests/dist/test_nccl.cpp: the NCCL transport at world size 1 (bootstrapped through the loopback, no MPI) against
// the loopback on the same data (tests/dist/nccl_case.h), with the comm's own stream and with a caller's stream;
// argument errors, the host-memory refusals (quantile_balance, the bootstrap), the CUDA weights the EP step needs
// with a device comm, and NCCL_NVLS_ENABLE. The multi-rank cases run under
// mpirun (test_mpi_nccl.cpp). In a build without the NCCL transport: make_nccl_comm's refusal.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "dist/comm.h"
#include "expect_error.h"

#ifdef KIMI_WITH_NCCL
#include <cuda_runtime.h>

#include "dist/balance.h"
#include "dist/ep_moe_case.h"
#include "dist/nccl_case.h"
#include "kimi/device.h"
#endif

namespace kimi::dist {
namespace {

TEST(CommMemory, HostTransports) {
  auto comm = make_loopback_comm();
  EXPECT_EQ(comm->memory(), CommMemory::host);
  EXPECT_EQ(comm->cuda_stream(), nullptr);
  comm->synchronize();
}

#ifndef KIMI_WITH_NCCL
TEST(NcclComm, RefusedWithoutNccl) {
  EXPECT_FALSE(nccl_available());
  auto boot = make_loopback_comm();
  EXPECT_KIMI_ERROR(make_nccl_comm(*boot), "dist::make_nccl_comm", "no NCCL transport", "KIMI_EP_NCCL");
}
#else

#define KIMI_NEEDS_GPU() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (these run on the GPU machine)"

// Sets an environment variable for a scope and restores the previous state.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* v = std::getenv(name)) old_ = v;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(NcclComm, WorldSize1OwnStreamEqualsLoopback) {
  KIMI_NEEDS_GPU();
  ASSERT_TRUE(nccl_available());
  auto boot = make_loopback_comm(), ref = make_loopback_comm();
  auto nccl = make_nccl_comm(*boot);
  EXPECT_EQ(nccl->name(), "nccl");
  EXPECT_EQ(nccl->rank(), 0);
  EXPECT_EQ(nccl->size(), 1);
  ASSERT_NE(std::getenv("NCCL_NVLS_ENABLE"), nullptr);
  EXPECT_EQ(std::string(std::getenv("NCCL_NVLS_ENABLE")), "0");
  testutil::nccl_round_trips(*nccl, *ref);
}

TEST(NcclComm, WorldSize1CallersStreamEqualsLoopback) {
  KIMI_NEEDS_GPU();
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  {
    auto boot = make_loopback_comm(), ref = make_loopback_comm();
    auto nccl = make_nccl_comm(*boot, {.device = 0, .stream = s, .timeout_s = 60.0});
    EXPECT_EQ(nccl->cuda_stream(), static_cast<void*>(s));
    testutil::nccl_round_trips(*nccl, *ref);
    // Stream-ordered: two all-reduces and the copies back enqueued with no host sync in between.
    testutil::DeviceBytes buf(sizeof(int64_t) * 3);
    const int64_t h[3] = {1, -2, 3};
    int64_t out[3] = {0, 0, 0};
    ASSERT_EQ(cudaMemcpyAsync(buf.p, h, sizeof h, cudaMemcpyHostToDevice, s), cudaSuccess);
    nccl->all_reduce_sum(std::span<int64_t>(static_cast<int64_t*>(buf.p), 3));
    nccl->all_reduce_sum(std::span<int64_t>(static_cast<int64_t*>(buf.p), 3));
    ASSERT_EQ(cudaMemcpyAsync(out, buf.p, sizeof out, cudaMemcpyDeviceToHost, s), cudaSuccess);
    nccl->synchronize();
    EXPECT_EQ(out[0], 1);
    EXPECT_EQ(out[1], -2);
    EXPECT_EQ(out[2], 3);
  }
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);  // the comm left the caller's stream alive
}

TEST(NcclComm, KeepsTheCallersDevice) {
  KIMI_NEEDS_GPU();
  const int last = cuda_device_count() - 1;
  ASSERT_EQ(cudaSetDevice(last), cudaSuccess);
  {
    auto boot = make_loopback_comm();
    auto nccl = make_nccl_comm(*boot, {.device = 0});
    int now = -1;
    ASSERT_EQ(cudaGetDevice(&now), cudaSuccess);
    EXPECT_EQ(now, last);
  }
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
}

TEST(NcclComm, BadArgumentsAreClearErrors) {
  KIMI_NEEDS_GPU();
  auto boot = make_loopback_comm();
  const std::string got = "got " + std::to_string(cuda_device_count());
  EXPECT_KIMI_ERROR(make_nccl_comm(*boot, {.device = cuda_device_count()}), "dist::make_nccl_comm", "'device'",
                    got.c_str());
  EXPECT_KIMI_ERROR(make_nccl_comm(*boot, {.timeout_s = 0.0}), "'timeout_s'", "expected > 0");
  auto nccl = make_nccl_comm(*boot);
  const std::vector<int64_t> one{2}, zero{0}, two{1, 1}, neg{-1};
  testutil::DeviceBytes buf(64);
  EXPECT_KIMI_ERROR(nccl->all_to_all_v(buf.p, two, one, buf.p, one, one, 4), "dist::nccl::all_to_all_v",
                    "'send_counts'", "expected 1 values", "got 2");
  EXPECT_KIMI_ERROR(nccl->all_to_all_v(buf.p, one, neg, buf.p, one, one, 4), "'send_displs[0]'", "expected >= 0",
                    "got -1");
  EXPECT_KIMI_ERROR(nccl->all_to_all_v(buf.p, one, zero, buf.p, zero, zero, 4), "'recv_counts[0]'", "expected 2",
                    "got 0");
  // The comm is still usable after argument errors (they are found before any NCCL call).
  nccl->barrier();
}

TEST(NcclComm, DeviceCommNeedsCudaWeightsAndHostOnlyOpsRefuseIt) {
  KIMI_NEEDS_GPU();
  auto boot = make_loopback_comm();
  auto nccl = make_nccl_comm(*boot);
  // A device-memory comm runs the CUDA EP step (test_ep_moe_cuda.cpp), which needs CUDA weights.
  testutil::EpMoeModel m = testutil::make_ep_moe_model("k3-tiny", false);
  EXPECT_KIMI_ERROR(EpMoe(*nccl, Placement::round_robin(1, 16), m.w, m.router, m.act, 1e-5f, 4), "dist::EpMoe",
                    "'w.router'", "expected a CUDA tensor", "'nccl'");
  Tensor scores(DType::f32, {4, 16}), bias(DType::f32, {16});
  EXPECT_KIMI_ERROR(quantile_balance(*nccl, scores.view(), bias.view(), 4), "dist::quantile_balance", "'comm'");
  EXPECT_KIMI_ERROR(make_nccl_comm(*nccl), "dist::make_nccl_comm", "'bootstrap'", "host-memory transport");
}

TEST(NcclComm, NvlsEnabledInTheEnvironmentIsAnError) {
  KIMI_NEEDS_GPU();
  ScopedEnv env("NCCL_NVLS_ENABLE", "1");
  auto boot = make_loopback_comm();
  EXPECT_KIMI_ERROR(make_nccl_comm(*boot), "dist::make_nccl_comm", "NCCL_NVLS_ENABLE=1", "allow_nvls");
}

#endif  // KIMI_WITH_NCCL

}  // namespace
}  // namespace kimi::dist
