// kda_recurrent_fwd's one-token path on CUDA (T = 1 without cu_seqlens): the launcher picks the streaming kernels
// (src/cuda/kda/recurrent_stream.cuh, the head's state block through shared memory) or the staged kernels
// (recurrent.cuh, state tiles in registers) by the states' layout and the grid size (recurrent.cu use_stream). Both
// families run every one-token harness case here, whatever the launcher would pick for its grid, and a slotted state
// pool, against the CPU backend. CI has no GPU: these run on the GPU machine (scripts/gpu/, results under docs/gpu/);
// a build without the CUDA backend registers none of them (tests/cuda_tests.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kimi/device.h"
#include "kimi/dtype.h"
#include "kimi/ops/kda.h"
#include "tensor_testutil.h"
#include "verify/cases/case.h"
#ifdef KIMI_WITH_CUDA
#include "cuda/kda/kda.h"
#endif

namespace kimi {
namespace {

#ifdef KIMI_WITH_CUDA
// The one-token family forced for calls through kimi::kda_recurrent_fwd on this thread (the harness cases and the
// CPU-vs-GPU comparisons below call the public operator), counting in `ran` which family each call took.
struct OneTokenPath {
  OneTokenPath(cuda::KdaOneTokenPath path, cuda::KdaLaunchRecord& ran) : scope({.one_token = path, .record = &ran}) {}
  cuda::ScopedKdaLaunchOptions scope;
};

const char* path_name(cuda::KdaOneTokenPath path) {
  return path == cuda::KdaOneTokenPath::streaming ? "streaming" : "staged";
}
constexpr cuda::KdaOneTokenPath kBothPaths[] = {cuda::KdaOneTokenPath::streaming, cuda::KdaOneTokenPath::staged};

// Whether the streaming kernels can take a harness case (shape "B=.. T=1 H=.. K=.. V=.. ... kv|vk", contiguous
// states): the state's row length (V for kv, K for vk) a multiple of 4 and K V <= 16384 (recurrent.cu use_stream).
bool streamable(const std::string& shape) {
  int K = 0, V = 0;
  const size_t k = shape.find(" K="), v = shape.find(" V=");
  if (k == std::string::npos || v == std::string::npos) return false;
  K = std::stoi(shape.substr(k + 3)), V = std::stoi(shape.substr(v + 3));
  const bool vk = shape.find(" vk") != std::string::npos;
  return (vk ? K : V) % 4 == 0 && K * V <= 16384;
}

// A host tensor of dtype dt with values uniform in [lo, hi) (rounded to dt).
Tensor random_tensor(DType dt, const std::vector<int64_t>& shape, float lo, float hi, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(lo, hi);
  Tensor t(dt, shape);
  for (int64_t i = 0; i < t.numel(); ++i) store_from_f32(t.data(), dt, i, u(rng));
  return t;
}

TEST(KdaOneTokenCuda, BothKernelFamiliesMatchTheOracle) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  for (const cuda::KdaOneTokenPath path : kBothPaths) {
    cuda::KdaLaunchRecord ran;
    const OneTokenPath force(path, ran);
    const bool want_stream = path == cuda::KdaOneTokenPath::streaming;
    int n = 0, streamed = 0;
    for (const verify::Case& c : verify::all_cases(verify::Scale::test)) {
      if (c.op != "kda_recurrent_fwd" || c.shape.find(" T=1 ") == std::string::npos) continue;
      ++n;
      const int64_t before = ran.one_token_streaming;
      const verify::Result r = c.run(Device::cuda(0));
      const bool stream = ran.one_token_streaming > before;
      streamed += stream;
      SCOPED_TRACE(std::string(path_name(path)) + " " + c.shape + " " + std::string(dtype_name(c.dtype)) + " " +
                   r.detail);
      // the family asked for wherever the states allow it (else the staged kernels: rows not whole 16-byte units)
      EXPECT_EQ(stream, want_stream && streamable(c.shape));
      EXPECT_TRUE(r.finite);
      EXPECT_TRUE(r.guards_ok);
      EXPECT_LE(r.err, c.tol);
    }
    EXPECT_GE(n, 26);
    if (want_stream) {
      EXPECT_GE(streamed, 20);
    }
  }
}

// A state pool indexed by state_slots, updated in place, at K = V = 128 (the streaming kernels' full block) and at a
// ragged K = 40, V = 36 (vk rows of 40, kv rows of 36: both streamable; f16 inputs there, bf16 at 128): o and the
// slotted rows equal the CPU backend's (fp32 state; only the fp32 summation order differs), the other pool rows are
// untouched, both families.
TEST(KdaOneTokenCuda, SlottedPoolMatchesTheCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  using testutil::copy_to;
  const Device gpu = Device::cuda(0);
  struct Dims {
    int64_t H, K, V;
    DType in;  // q, k, v, raw gate and beta
  };
  for (const Dims d : {Dims{3, 128, 128, DType::bf16}, Dims{2, 40, 36, DType::f16}}) {
    for (StateLayout layout : {StateLayout::kv, StateLayout::vk}) {
      for (const cuda::KdaOneTokenPath path : kBothPaths) {
        cuda::KdaLaunchRecord ran;
        const OneTokenPath force(path, ran);
        const int64_t N = 3, S = 5, H = d.H, K = d.K, V = d.V;
        std::mt19937_64 rng(uint64_t(17 + K + (layout == StateLayout::vk)));
        const auto filled = [&](DType dt, const std::vector<int64_t>& shape, float lo, float hi) {
          return random_tensor(dt, shape, lo, hi, rng);
        };
        const Tensor q = filled(d.in, {N, 1, H, K}, -1, 1), k = filled(d.in, {N, 1, H, K}, -1, 1);
        const Tensor v = filled(d.in, {N, 1, H, V}, -1, 1), f = filled(d.in, {N, 1, H, K}, -8, 8);
        const Tensor b = filled(d.in, {N, 1, H}, -4, 4), A_log = filled(DType::f32, {H}, -2, 1);
        const Tensor dt_bias = filled(DType::f32, {H, K}, -8, 8);
        const std::vector<int64_t> row_shape =
            layout == StateLayout::kv ? std::vector<int64_t>{S, H, K, V} : std::vector<int64_t>{S, H, V, K};
        const Tensor pool0 = filled(DType::f32, row_shape, -1, 1);
        Tensor slots(DType::i32, {N});
        const int32_t slot[3] = {4, 0, 2};
        std::memcpy(slots.data(), slot, sizeof slot);

        auto run = [&](Device dev, Tensor& pool, Tensor& o) {
          const Tensor qd = copy_to(q, dev), kd = copy_to(k, dev), vd = copy_to(v, dev), fd = copy_to(f, dev);
          const Tensor bd = copy_to(b, dev), Ad = copy_to(A_log, dev), dtd = copy_to(dt_bias, dev);
          pool = copy_to(pool0, dev);
          o = Tensor(DType::f32, {N, 1, H, V}, dev);
          KdaArgs a;
          a.q = qd, a.k = kd, a.v = vd, a.g = fd, a.beta = bd, a.o = o;
          a.gate = KdaGate{GateForm::bounded, Ad, dtd, -5.f};
          a.beta_sigmoid_in_kernel = a.qk_l2norm_in_kernel = true;
          a.initial_state = a.final_state = pool;
          a.state_layout = layout, a.state_slots = slots;
          const int64_t before = ran.one_token_streaming;
          kda_recurrent_fwd(a);
          if (dev.type == DeviceType::cuda) {
            EXPECT_EQ(ran.one_token_streaming > before, path == cuda::KdaOneTokenPath::streaming);
          }
          pool = copy_to(pool, Device::cpu()), o = copy_to(o, Device::cpu());
        };
        Tensor pool_c, o_c, pool_g, o_g;
        run(Device::cpu(), pool_c, o_c);
        run(gpu, pool_g, o_g);
        const std::string what = std::string(path_name(path)) + (layout == StateLayout::kv ? " kv" : " vk") +
                                 " K=" + std::to_string(K) + " V=" + std::to_string(V);
        for (int64_t e = 0; e < o_c.numel(); ++e) {
          const float want = o_c.data_as<float>()[e], got = o_g.data_as<float>()[e];
          ASSERT_NEAR(got, want, 1e-4 * (1 + std::fabs(want))) << what << " o element " << e;
        }
        const int64_t row = H * K * V;
        for (int64_t s = 0; s < S; ++s) {
          const bool slotted = s == 4 || s == 0 || s == 2;
          for (int64_t e = s * row; e < (s + 1) * row; ++e) {
            const float want = (slotted ? pool_c : pool0).data_as<float>()[e], got = pool_g.data_as<float>()[e];
            if (slotted)
              ASSERT_NEAR(got, want, 1e-4 * (1 + std::fabs(want))) << what << " pool row " << s << " element " << e;
            else
              ASSERT_EQ(got, want) << what << " untouched pool row " << s << " element " << e;
          }
        }
      }
    }
  }
}

// An initial state without a final state: the streaming kernels read the block and write only o (equal to the CPU
// backend's), the initial state stays as it was; both layouts, both families.
TEST(KdaOneTokenCuda, WithoutAFinalStateOnlyOIsWritten) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  using testutil::copy_to;
  const int64_t N = 3, H = 2, K = 64, V = 64;
  std::mt19937_64 rng(29);
  const auto filled = [&](DType dt, const std::vector<int64_t>& shape, float scale) {
    return random_tensor(dt, shape, -scale, scale, rng);
  };
  const Tensor q = filled(DType::bf16, {N, 1, H, K}, 1), k = filled(DType::bf16, {N, 1, H, K}, 1);
  const Tensor v = filled(DType::bf16, {N, 1, H, V}, 1), b = filled(DType::bf16, {N, 1, H}, 4);
  const Tensor h0 = filled(DType::f32, {N, H, K, V}, 1);
  Tensor g = filled(DType::f32, {N, 1, H, K}, 0.2f);  // the log decay (no fused gate): g <= 0
  for (int64_t i = 0; i < g.numel(); ++i) g.data_as<float>()[i] = -std::fabs(g.data_as<float>()[i]);
  for (StateLayout layout : {StateLayout::kv, StateLayout::vk}) {
    for (const cuda::KdaOneTokenPath path : kBothPaths) {
      cuda::KdaLaunchRecord ran;
      const OneTokenPath force(path, ran);
      auto run = [&](Device dev, Tensor& state, Tensor& o) {
        const Tensor qd = copy_to(q, dev), kd = copy_to(k, dev), vd = copy_to(v, dev), gd = copy_to(g, dev);
        const Tensor bd = copy_to(b, dev);
        state = copy_to(h0, dev);
        o = Tensor(DType::f32, {N, 1, H, V}, dev);
        KdaArgs a;
        a.q = qd, a.k = kd, a.v = vd, a.g = gd, a.beta = bd, a.o = o;
        a.beta_sigmoid_in_kernel = a.qk_l2norm_in_kernel = true;
        a.initial_state = state;  // no final_state
        a.state_layout = layout;
        const int64_t before = ran.one_token_streaming;
        kda_recurrent_fwd(a);
        if (dev.type == DeviceType::cuda) {
          EXPECT_EQ(ran.one_token_streaming > before, path == cuda::KdaOneTokenPath::streaming);
        }
        state = copy_to(state, Device::cpu()), o = copy_to(o, Device::cpu());
      };
      Tensor st_c, o_c, st_g, o_g;
      run(Device::cpu(), st_c, o_c);
      run(Device::cuda(0), st_g, o_g);
      const std::string what = std::string(path_name(path)) + (layout == StateLayout::kv ? " kv" : " vk");
      for (int64_t e = 0; e < o_c.numel(); ++e) {
        const float want = o_c.data_as<float>()[e], got = o_g.data_as<float>()[e];
        ASSERT_NEAR(got, want, 1e-4 * (1 + std::fabs(want))) << what << " o element " << e;
      }
      for (int64_t e = 0; e < h0.numel(); ++e)
        ASSERT_EQ(st_g.data_as<float>()[e], h0.data_as<float>()[e]) << what << " initial state element " << e;
    }
  }
}
#endif  // KIMI_WITH_CUDA

}  // namespace
}  // namespace kimi
