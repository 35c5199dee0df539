// tests/dist/test_ep_moe_cuda.cpp: the CUDA EP step (dist::EpMoe over an NCCL comm, src/dist/moe_cuda.h) at world
// size 1 (NCCL bootstrapped through the loopback, as test_nccl.cpp) on k3-tiny / kimi-linear-tiny's MoE shapes
// (ep_moe_case.h: seeded weights), against
//   - the single-process CUDA latent_moe on the same device weights and x: f32 x / weights: relative RMS <= 1e-5
//     (both are fp32 throughout; they differ only in summation order: the kernel the experts take, and the combine,
//     ascending expert here, slot order there: each output is a sum of <= ~10^3 products, whose rounding error in
//     RMS is ~sqrt(n) * 2^-24 ~ 2e-6); bf16 x / weights: relative RMS <= 2^-8 (the intermediate and output
//     roundings to bf16, ~2^-9 relative each, may flip by one bf16 step where the fp32 values above differ);
//   - the CPU EpMoe (loopback comm) on the same host weights and x: f32: relative RMS <= 1e-5 (fp32 on both, order
//     only, as above); bf16: kBar = 5e-3, the bar of the CUDA-vs-CPU latent_moe tests (SPEC 14: the tensor-core
//     path rounds its operands z and the GLU output to bf16, the CPU keeps them fp32).
// Routing (ids) must be identical to both. Policies any_rank and holders_only; a skewed routing (router bias +8 on
// experts 3 and 11: every token picks both, half of all pairs); T < S and T = S; a second step allocates no
// device tensor (the buffers are static); the any-rank step (its plan on the device) captured in a CUDA graph
// replays bit-identically to eager steps; argument errors name the argument. GPU tests: they skip without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "dist/comm.h"
#include "expect_error.h"

#ifdef KIMI_WITH_NCCL
#include <cuda_runtime.h>

#include "dist/ep_moe_case.h"
#include "kimi/device.h"
#include "kimi/ops/moe.h"

namespace kimi::dist {
namespace {

#define KIMI_NEEDS_GPU() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (these run on the GPU machine)"

constexpr int64_t kMaxTokens = 24;  // S

// A host tensor of `h`'s values in dtype `dt` on `dev` (bf16: rounded to nearest even).
Tensor convert_to(const TensorView& h, DType dt, Device dev) {
  Tensor host(dt, std::span<const int64_t>(h.shape.data(), size_t(h.ndim)));
  for (int64_t i = 0; i < h.numel(); ++i) store_from_f32(host.data(), dt, i, load_as_f32(h.data, h.dtype, i));
  if (dev == Device::cpu()) return host;
  Tensor d(dt, std::span<const int64_t>(h.shape.data(), size_t(h.ndim)), dev);
  copy(d, host);
  return d;
}

std::vector<float> host_f32(const TensorView& t) {
  Tensor h(t.dtype, std::span<const int64_t>(t.shape.data(), size_t(t.ndim)));
  copy(h, t);
  std::vector<float> v(size_t(h.numel()));
  for (int64_t i = 0; i < h.numel(); ++i) v[size_t(i)] = load_as_f32(h.data(), t.dtype, i);
  return v;
}

double rel_rms(const std::vector<float>& got, const std::vector<float>& ref) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) ADD_FAILURE() << "non-finite output at " << i;
    err += (double(got[i]) - ref[i]) * (double(got[i]) - ref[i]);
    norm += double(ref[i]) * ref[i];
  }
  return std::sqrt(err / norm);
}

// The MoE weights of `m` in dtype wt on `dev` (the router bias and the latent norm weight stay f32).
struct DeviceModel {
  std::vector<Tensor> store;
  std::vector<MlpWeights> experts;
  MlpWeights shared;
  LatentMoeWeights w;

  // stacked: every expert projection a view into one [E * out, in] tensor (evenly strided: the expert kernels'
  // stacked layout, which CUDA graph capture needs: cuda/moe/experts.h); else one tensor per expert projection.
  DeviceModel(const testutil::EpMoeModel& m, DType wt, Device dev, bool stacked = false) {
    store.reserve(256);
    const auto put = [&](const Weight& x) {
      if (!x.w.present()) return Weight{};
      store.push_back(convert_to(x.w, wt, dev));
      return Weight{store.back(), {}};
    };
    const auto put_f32 = [&](const TensorView& x) {
      if (!x.present()) return TensorView{};
      store.push_back(convert_to(x, DType::f32, dev));
      return store.back().view();
    };
    w.router = put(m.w.router);
    w.router_bias = put_f32(m.w.router_bias);
    w.latent_down = put(m.w.latent_down);
    w.latent_up = put(m.w.latent_up);
    w.latent_norm = put_f32(m.w.latent_norm);
    if (stacked) {
      experts.resize(m.experts.size());
      for (Weight MlpWeights::*proj : {&MlpWeights::gate, &MlpWeights::up, &MlpWeights::down}) {
        const int64_t rows = (m.experts[0].*proj).w.size(0), cols = (m.experts[0].*proj).w.size(1);
        const auto ne = int64_t(m.experts.size());
        Tensor host(wt, {ne * rows, cols});
        for (int64_t e = 0; e < ne; ++e)
          for (int64_t i = 0; i < rows * cols; ++i)
            store_from_f32(host.data(), wt, e * rows * cols + i,
                           load_as_f32((m.experts[size_t(e)].*proj).w.data, DType::f32, i));
        store.emplace_back(wt, std::initializer_list<int64_t>{ne * rows, cols}, dev);
        copy(store.back(), host);
        auto* base = static_cast<char*>(store.back().data());
        for (int64_t e = 0; e < ne; ++e)
          experts[size_t(e)].*proj =
              Weight{TensorView(base + e * rows * cols * dtype_size(wt), wt, {rows, cols}, dev), {}};
      }
    } else {
      for (const MlpWeights& e : m.experts) experts.push_back({put(e.gate), put(e.up), put(e.down)});
    }
    w.experts = experts;
    if (m.w.shared) {
      shared = {put(m.shared.gate), put(m.shared.up), put(m.shared.down)};
      w.shared = &shared;
    }
  }
};

struct Case {
  std::string name;
  DType dt;
  PlanPolicy policy;
  bool skew;
  int64_t t;
};

std::string name_of(const Case& c) {
  return c.name + (c.dt == DType::bf16 ? " bf16" : " f32") +
         (c.policy == PlanPolicy::holders_only ? " holders_only" : " any_rank") + (c.skew ? " skew" : "") +
         " T=" + std::to_string(c.t);
}

void check_case(const Case& c) {
  SCOPED_TRACE(name_of(c));
  const testutil::EpMoeModel m = testutil::make_ep_moe_model(c.name, c.skew);
  const Device dev = Device::cuda(0);
  const DeviceModel gpu(m, c.dt, dev), cpu(m, c.dt, Device::cpu());
  Tensor x32(DType::f32, {c.t, m.d});
  fill_random(x32, 7 + uint64_t(c.t), -1.0, 1.0);
  const Tensor xh = convert_to(x32, c.dt, Device::cpu()), xd = convert_to(x32, c.dt, dev);
  const Placement pl = Placement::round_robin(1, int(m.e));

  // The CUDA EP step (twice: the second step must allocate no device tensor and give the same bytes).
  auto boot = make_loopback_comm();
  auto nccl = make_nccl_comm(*boot);
  EpMoe ep(*nccl, pl, gpu.w, m.router, m.act, 1e-5f, kMaxTokens, c.policy);
  const Tensor out(c.dt, {c.t, m.d}, dev), ids(DType::i32, {c.t, m.k}, dev), wts(DType::f32, {c.t, m.k}, dev);
  EpStepStats stats;
  ep.forward(xd, out, ids, wts, &stats);
  nccl->synchronize();
  const std::vector<float> got = host_f32(out);
  const uint64_t allocs = device_alloc_count();
  ep.forward(xd, out, ids, wts);
  nccl->synchronize();
  EXPECT_EQ(device_alloc_count(), allocs) << "a step allocated a device tensor";
  EXPECT_EQ(host_f32(out), got) << "two steps on the same input differ";
  EXPECT_EQ(stats.total_pairs, c.t * m.k);
  EXPECT_EQ(stats.load, std::vector<int64_t>{c.t * m.k});

  // The single-process CUDA latent_moe on the same weights.
  const Tensor ref_g(c.dt, {c.t, m.d}, dev), ids_g(DType::i32, {c.t, m.k}, dev), wts_g(DType::f32, {c.t, m.k}, dev);
  latent_moe(xd, gpu.w, m.router, m.act, 1e-5f, ref_g, ids_g, wts_g);
  synchronize(dev);
  const double bar_gpu = c.dt == DType::bf16 ? 1.0 / 256 : 1e-5;
  const double e_gpu = rel_rms(got, host_f32(ref_g));
  EXPECT_LE(e_gpu, bar_gpu) << "against the CUDA latent_moe";
  EXPECT_EQ(host_f32(ids), host_f32(ids_g)) << "routing differs from the CUDA latent_moe";
  EXPECT_EQ(host_f32(wts), host_f32(wts_g)) << "routing weights differ from the CUDA latent_moe";

  // The CPU EpMoe (loopback) on the same host weights.
  auto loop = make_loopback_comm();
  EpMoe ep_cpu(*loop, pl, cpu.w, m.router, m.act, 1e-5f, kMaxTokens, c.policy);
  const Tensor ref_c(c.dt, {c.t, m.d}), ids_c(DType::i32, {c.t, m.k});
  ep_cpu.forward(xh, ref_c, ids_c);
  const double bar_cpu = c.dt == DType::bf16 ? 5e-3 : 1e-5;
  const double e_cpu = rel_rms(got, host_f32(ref_c));
  EXPECT_LE(e_cpu, bar_cpu) << "against the CPU EpMoe";
  EXPECT_EQ(host_f32(ids), host_f32(ids_c)) << "routing differs from the CPU EpMoe";
  std::printf("  %s: relative RMS %.3g (CUDA latent_moe), %.3g (CPU EpMoe)\n", name_of(c).c_str(), e_gpu, e_cpu);

  if (c.skew) {  // every token picks experts 3 and 11
    const std::vector<float> id = host_f32(ids);
    int64_t hot = 0;
    for (const float e : id) hot += e == 3.f || e == 11.f;
    EXPECT_EQ(hot, 2 * c.t);
  }
}

void check_all(const std::string& name, DType dt) {
  for (const PlanPolicy policy : {PlanPolicy::any_rank, PlanPolicy::holders_only})
    for (const bool skew : {false, true})
      for (const int64_t t : {int64_t(5), kMaxTokens}) check_case({name, dt, policy, skew, t});
}

TEST(EpMoeCuda, K3TinyF32) {
  KIMI_NEEDS_GPU();
  check_all("k3-tiny", DType::f32);
}
TEST(EpMoeCuda, K3TinyBf16) {
  KIMI_NEEDS_GPU();
  check_all("k3-tiny", DType::bf16);
}
TEST(EpMoeCuda, KimiLinearTinyF32) {
  KIMI_NEEDS_GPU();
  check_all("kimi-linear-tiny", DType::f32);
}
TEST(EpMoeCuda, KimiLinearTinyBf16) {
  KIMI_NEEDS_GPU();
  check_all("kimi-linear-tiny", DType::bf16);
}

// The any-rank step (its plan on the device: no host synchronisation) recorded into a CUDA graph on the comm's
// stream replays bit-identically to eager steps: on the captured input, and on a new input written into the same
// buffer (the output overwritten with NaN before each replay). Stacked experts (the launchers refuse per-call weight
// tables under capture); T = 5 of S = 24, so the fixed peer slots carry rows past the counts too.
TEST(EpMoeCuda, AnyRankStepCapturesInAGraphAndReplaysBitIdentically) {
  KIMI_NEEDS_GPU();
  const Device dev = Device::cuda(0);
  for (const std::string name : {"k3-tiny", "kimi-linear-tiny"})
    for (const DType dt : {DType::f32, DType::bf16})
      for (const bool skew : {false, true}) {
        SCOPED_TRACE(name + (dt == DType::bf16 ? " bf16" : " f32") + (skew ? " skew" : ""));
        const testutil::EpMoeModel m = testutil::make_ep_moe_model(name, skew);
        const DeviceModel gpu(m, dt, dev, /*stacked=*/true);
        const int64_t t = 5;
        Tensor x1(DType::f32, {t, m.d}), x2(DType::f32, {t, m.d});
        fill_random(x1, 11, -1.0, 1.0);
        fill_random(x2, 12, -1.0, 1.0);
        const Tensor xd1 = convert_to(x1, dt, dev), xd2 = convert_to(x2, dt, dev);
        const Tensor x(dt, {t, m.d}, dev), out(dt, {t, m.d}, dev);
        const Tensor ids(DType::i32, {t, m.k}, dev), wts(DType::f32, {t, m.k}, dev);
        auto boot = make_loopback_comm();
        auto nccl = make_nccl_comm(*boot);
        EpMoe ep(*nccl, Placement::round_robin(1, int(m.e)), gpu.w, m.router, m.act, 1e-5f, kMaxTokens);
        const auto set_x = [&](const Tensor& src) {
          nccl->synchronize();
          copy(x, src);
          synchronize(dev);  // the copy, before the comm's (non-blocking) stream reads x
        };
        const auto run = [&] { ep.forward(x, out, ids, wts); };
        const auto result = [&] {
          nccl->synchronize();
          std::vector<float> v = host_f32(out), i = host_f32(ids), w = host_f32(wts);
          v.insert(v.end(), i.begin(), i.end());
          v.insert(v.end(), w.begin(), w.end());
          return v;
        };
        set_x(xd1);
        run();
        const std::vector<float> want1 = result();
        set_x(xd2);
        run();
        const std::vector<float> want2 = result();
        EXPECT_NE(want1, want2);

        set_x(xd1);
        const auto st = static_cast<cudaStream_t>(nccl->cuda_stream());
        cudaGraph_t g = nullptr;
        ASSERT_EQ(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), cudaSuccess);
        EXPECT_NO_THROW(run());
        ASSERT_EQ(cudaStreamEndCapture(st, &g), cudaSuccess);
        cudaGraphExec_t ge = nullptr;
        ASSERT_EQ(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
        for (const auto& [src, want] : {std::pair{&xd1, &want1}, std::pair{&xd2, &want2}}) {
          set_x(*src);
          ASSERT_EQ(cudaMemsetAsync(out.data(), 0xff, size_t(out.numel()) * dtype_size(dt), st), cudaSuccess);
          ASSERT_EQ(cudaGraphLaunch(ge, st), cudaSuccess);
          EXPECT_EQ(result(), *want) << (src == &xd1 ? "replay on the captured input" : "replay on a new input");
        }
        cudaGraphExecDestroy(ge);
        cudaGraphDestroy(g);
      }
}

// T = 0 on this rank: the step still runs its collectives and writes nothing.
TEST(EpMoeCuda, NoTokens) {
  KIMI_NEEDS_GPU();
  const testutil::EpMoeModel m = testutil::make_ep_moe_model("k3-tiny", false);
  const DeviceModel gpu(m, DType::f32, Device::cuda(0));
  auto boot = make_loopback_comm();
  auto nccl = make_nccl_comm(*boot);
  EpMoe ep(*nccl, Placement::round_robin(1, int(m.e)), gpu.w, m.router, m.act, 1e-5f, kMaxTokens);
  const Tensor x(DType::f32, {0, m.d}, Device::cuda(0)), out(DType::f32, {0, m.d}, Device::cuda(0));
  EpStepStats stats;
  ep.forward(x, out, {}, {}, &stats);
  nccl->synchronize();
  EXPECT_EQ(stats.total_pairs, 0);
}

TEST(EpMoeCuda, ArgumentErrorsNameTheArgument) {
  KIMI_NEEDS_GPU();
  const testutil::EpMoeModel m = testutil::make_ep_moe_model("k3-tiny", false);
  const Device dev = Device::cuda(0);
  const DeviceModel gpu(m, DType::f32, dev);
  const Placement pl = Placement::round_robin(1, int(m.e));
  auto boot = make_loopback_comm();
  auto nccl = make_nccl_comm(*boot);
  // Host weights with a device comm.
  EXPECT_KIMI_ERROR(EpMoe(*nccl, pl, m.w, m.router, m.act, 1e-5f, 4), "dist::EpMoe", "'w.router'",
                    "expected a CUDA tensor", "'nccl'", "got cpu");
  EpMoe ep(*nccl, pl, gpu.w, m.router, m.act, 1e-5f, 4);
  const Tensor xh(DType::f32, {3, m.d}), outh(DType::f32, {3, m.d});
  const Tensor xd(DType::f32, {3, m.d}, dev), outd(DType::f32, {3, m.d}, dev);
  // Host x with a device comm.
  EXPECT_KIMI_ERROR(ep.forward(xh, outd), "dist::EpMoe::forward", "argument 'x'", "expected a CUDA tensor",
                    "'nccl'", "got cpu");
  EXPECT_KIMI_ERROR(ep.forward(xd, outh), "dist::EpMoe::forward", "argument 'out'", "expected a CUDA tensor");
  const Tensor ids_h(DType::i32, {3, m.k});
  EXPECT_KIMI_ERROR(ep.forward(xd, outd, ids_h), "argument 'ids'", "expected a CUDA tensor");
  const Tensor ids_bad(DType::f32, {3, m.k}, dev);
  EXPECT_KIMI_ERROR(ep.forward(xd, outd, ids_bad), "argument 'ids'", "expected i32", "got f32");
  const Tensor x_big(DType::f32, {5, m.d}, dev), out_big(DType::f32, {5, m.d}, dev);
  EXPECT_KIMI_ERROR(ep.forward(x_big, out_big), "argument 'x'", "T <= max_tokens (4)", "[5, ");
  // Device x with a host comm (the CPU step).
  auto loop = make_loopback_comm();
  EpMoe ep_cpu(*loop, pl, m.w, m.router, m.act, 1e-5f, 4);
  EXPECT_KIMI_ERROR(ep_cpu.forward(xd, outh), "dist::EpMoe::forward", "'x'", "expected host (cpu) tensors",
                    "'loopback'", "cuda:0");
  // The comm is still usable after the argument errors (found before any collective).
  ep.forward(xd, outd);
  nccl->synchronize();
}

}  // namespace
}  // namespace kimi::dist

#endif  // KIMI_WITH_NCCL
