// kimi/ops/kda_decode.h: the fused decode step equals its parts run one by one (short_conv_update x3 with
// cache slots, kda_recurrent_fwd with state slots, gated_rms_norm) bit for bit, in both state layouts,
// with and without the output gate, bf16 inputs; pool rows outside the slots are untouched; bad input is
// rejected before any cache or state row changes. (The fp64 oracle comparison is a harness case.)
// With a CUDA device (tests registered in a build with the CUDA backend only: tests/cuda_tests.h): the step
// captured in a CUDA graph with slots on the device, replayed 3 times with new inputs and slot values, equals 3
// eager CUDA calls bit for bit and 3 eager CPU calls within the f32 tolerance; a device slot outside the pool skips
// its sequence (NaN y rows, pool rows untouched).
#include <gtest/gtest.h>

#ifdef KIMI_WITH_CUDA
#include <cuda_runtime.h>

#include "cuda/kda/kda.h"
#endif

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "expect_error.h"
#include "kimi/device.h"
#include "tensor_testutil.h"
#include "verify/cases/case.h"
#include "kimi/ops/conv.h"
#include "kimi/ops/kda.h"
#include "kimi/ops/kda_decode.h"
#include "kimi/ops/norm.h"

namespace kimi {
namespace {

void fill(const Tensor& t, std::mt19937_64& rng, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) store_from_f32(t.data(), t.view().dtype, i, float(u(rng)));
}

Tensor copy_of(const Tensor& t) {
  Tensor c(t.view().dtype, std::span<const int64_t>(t.view().shape.data(), size_t(t.view().ndim)));
  std::memcpy(c.data(), t.data(), t.nbytes());
  return c;
}

bool same_bytes(const Tensor& a, const Tensor& b) { return a.nbytes() == b.nbytes() && !std::memcmp(a.data(), b.data(), a.nbytes()); }

struct Step {
  int64_t N = 3, H = 2, K = 16, V = 8, S = 5, W = 4;
  Tensor xq, xk, xv, f, b, z, wq, wk, wv, cq, ck, cv, A_log, dt_bias, o_norm, state, slots, y;
  Step(DType dt, StateLayout layout, uint64_t seed, int64_t k_dim = 16, int64_t v_dim = 8) {
    K = k_dim, V = v_dim;
    const int64_t P = H * K, Pv = H * V;
    std::mt19937_64 rng(seed);
    xq = Tensor(dt, {N, P}), xk = Tensor(dt, {N, P}), xv = Tensor(dt, {N, Pv}), f = Tensor(dt, {N, P});
    b = Tensor(dt, {N, H}), z = Tensor(dt, {N, Pv}), y = Tensor(dt, {N, Pv});
    wq = Tensor(DType::f32, {P, 1, W}), wk = Tensor(DType::f32, {P, 1, W}), wv = Tensor(DType::f32, {Pv, 1, W});
    cq = Tensor(DType::f32, {S, P, W - 1}), ck = Tensor(DType::f32, {S, P, W - 1}), cv = Tensor(DType::f32, {S, Pv, W - 1});
    A_log = Tensor(DType::f32, {H}), dt_bias = Tensor(DType::f32, {P}), o_norm = Tensor(DType::f32, {V});
    state = layout == StateLayout::kv ? Tensor(DType::f32, {S, H, K, V}) : Tensor(DType::f32, {S, H, V, K});
    for (const Tensor* t : {&xq, &xk, &xv, &z, &wq, &wk, &wv, &cq, &ck, &cv, &state}) fill(*t, rng, -1, 1);
    fill(f, rng, -8, 8), fill(b, rng, -4, 4), fill(A_log, rng, -2, 1), fill(dt_bias, rng, -3, 3), fill(o_norm, rng, 0.5, 1.5);
    slots = Tensor(DType::i32, {N});
    const int32_t s[3] = {4, 0, 2};
    std::memcpy(slots.data(), s, sizeof s);
  }
};

KdaDecodeArgs args_of(const Step& s, GateForm form, StateLayout layout, bool gated) {
  KdaDecodeArgs a;
  a.x_q = s.xq, a.x_k = s.xk, a.x_v = s.xv, a.conv_q = s.wq, a.conv_k = s.wk, a.conv_v = s.wv;
  a.cache_q = s.cq, a.cache_k = s.ck, a.cache_v = s.cv, a.f = s.f, a.b = s.b;
  a.gate = KdaGate{form, s.A_log, s.dt_bias, -5.f};
  if (gated) a.z = s.z;
  a.o_norm = s.o_norm, a.norm_eps = 1e-5f, a.state = s.state, a.state_layout = layout, a.slots = s.slots, a.y = s.y;
  return a;
}

TEST(KdaDecodeStep, EqualsItsPartsInPools) {
  for (StateLayout layout : {StateLayout::kv, StateLayout::vk}) {
    for (bool gated : {false, true}) {
      for (DType dt : {DType::f32, DType::bf16}) {
        const GateForm form = gated ? GateForm::bounded : GateForm::softplus;
        const Step fused(dt, layout, 7), parts(dt, layout, 7);
        kda_decode_step(args_of(fused, form, layout, gated));
        // the same step, one public operator at a time
        const int64_t N = parts.N, H = parts.H, K = parts.K, V = parts.V;
        Tensor q(DType::f32, {N, H * K}), k(DType::f32, {N, H * K}), v(DType::f32, {N, H * V}), o(DType::f32, {N, H * V});
        short_conv_update(parts.xq, parts.wq, parts.cq, parts.slots, ConvActivation::silu, q);
        short_conv_update(parts.xk, parts.wk, parts.ck, parts.slots, ConvActivation::silu, k);
        short_conv_update(parts.xv, parts.wv, parts.cv, parts.slots, ConvActivation::silu, v);
        KdaArgs r;
        r.q = q.view().reshape({N, 1, H, K}), r.k = k.view().reshape({N, 1, H, K}), r.v = v.view().reshape({N, 1, H, V});
        r.g = parts.f.view().reshape({N, 1, H, K}), r.beta = parts.b.view().reshape({N, 1, H});
        r.gate = KdaGate{form, parts.A_log, parts.dt_bias, -5.f};
        r.beta_sigmoid_in_kernel = r.qk_l2norm_in_kernel = true;
        r.initial_state = r.final_state = parts.state;
        r.state_layout = layout, r.state_slots = parts.slots;
        r.o = o.view().reshape({N, 1, H, V});
        kda_recurrent_fwd(r);
        gated_rms_norm(o.view().reshape({N, H, V}), gated ? parts.z.view().reshape({N, H, V}) : TensorView{}, parts.o_norm,
                       1e-5f, parts.y.view().reshape({N, H, V}));
        const std::string what = std::string(layout == StateLayout::kv ? "kv" : "vk") + (gated ? " gated " : " ") +
                                 std::string(dtype_name(dt));
        EXPECT_TRUE(same_bytes(fused.y, parts.y)) << what;
        EXPECT_TRUE(same_bytes(fused.state, parts.state)) << what;  // incl. untouched rows 1 and 3
        EXPECT_TRUE(same_bytes(fused.cq, parts.cq) && same_bytes(fused.ck, parts.ck) && same_bytes(fused.cv, parts.cv)) << what;
        const Step fresh(dt, layout, 7);
        const size_t row = fresh.state.nbytes() / 5;
        for (int64_t untouched : {1, 3})
          EXPECT_EQ(std::memcmp(static_cast<char*>(fused.state.data()) + untouched * row,
                                static_cast<char*>(fresh.state.data()) + untouched * row, row), 0) << what;
      }
    }
  }
}

TEST(KdaDecodeStep, RejectsBadInputBeforeWriting) {
  const Step s(DType::bf16, StateLayout::kv, 9);
  const Tensor state0 = copy_of(s.state), cq0 = copy_of(s.cq), y0 = copy_of(s.y);
  auto with = [&](auto edit) {
    KdaDecodeArgs a = args_of(s, GateForm::bounded, StateLayout::kv, true);
    edit(a);
    return a;
  };
  const Tensor bad_norm(DType::f32, {9}), bad_state(DType::f32, {5, 2, 8, 16}), bad_cache(DType::f32, {5, 32, 2});
  const Tensor dup(DType::i32, {3}), wide(DType::f32, {32, 1, 5}), bf_state(DType::bf16, {5, 2, 16, 8});
  EXPECT_KIMI_ERROR(kda_decode_step(with([&](auto& a) { a.o_norm = bad_norm; })), "kda_decode_step", "'o_norm'", "[8]", "[9]");
  EXPECT_KIMI_ERROR(kda_decode_step(with([&](auto& a) { a.state = bad_state; })), "'state'", "[5, 2, 16, 8]", "[5, 2, 8, 16]");
  EXPECT_KIMI_ERROR(kda_decode_step(with([&](auto& a) { a.state = bf_state; })), "'state'", "f32", "bf16");
  EXPECT_KIMI_ERROR(kda_decode_step(with([&](auto& a) { a.cache_k = bad_cache; })), "'cache_k'", "[5, 32, 3]", "[5, 32, 2]");
  EXPECT_KIMI_ERROR(kda_decode_step(with([&](auto& a) { a.slots = dup; })), "'slots'", "distinct", "slots[0] = slots[1] = 0");
  EXPECT_KIMI_ERROR(kda_decode_step(with([&](auto& a) { a.conv_k = wide; })), "'conv_k'", "kernel width 4", "5");
  EXPECT_KIMI_ERROR(kda_decode_step(with([&](auto& a) { a.y = a.x_v; })), "'y'", "disjoint from 'x_v'");
  EXPECT_KIMI_ERROR(kda_decode_step(with([&](auto& a) { a.gate.lower_bound = 1.f; })), "'gate.lower_bound'", "<= 0");
  const Tensor b3(DType::bf16, {3, 3});
  EXPECT_KIMI_ERROR(kda_decode_step(with([&](auto& a) { a.b = b3; })), "'b'", "dividing x_q.shape[1] = 32", "3");
  EXPECT_TRUE(same_bytes(s.state, state0));
  EXPECT_TRUE(same_bytes(s.cq, cq0));
  EXPECT_TRUE(same_bytes(s.y, y0));
}

// Slots on a CUDA device: only dtype, shape, device and overlap can be checked (views marked cuda:0 over host
// memory: validation fails before anything runs, so this needs no device).
TEST(KdaDecodeStep, RejectsBadDeviceSlots) {
  const Step s(DType::f32, StateLayout::kv, 9);
  const Device gpu = Device::cuda(0);
  auto on = [](TensorView v, Device d) {
    v.device = d;
    return v;
  };
  auto gpu_args = [&](TensorView slots) {
    KdaDecodeArgs a = args_of(s, GateForm::bounded, StateLayout::kv, true);
    for (TensorView* t : {&a.x_q, &a.x_k, &a.x_v, &a.conv_q, &a.conv_k, &a.conv_v, &a.cache_q, &a.cache_k, &a.cache_v,
                          &a.f, &a.gate.A_log, &a.gate.dt_bias, &a.b, &a.z, &a.o_norm, &a.state, &a.y})
      *t = on(*t, gpu);
    a.slots = slots;
    return a;
  };
  const Tensor f32(DType::f32, {3}), i32x4(DType::i32, {4}), i32x31(DType::i32, {3, 1}), i32(DType::i32, {3});
  EXPECT_KIMI_ERROR(kda_decode_step(gpu_args(on(f32, gpu))), "kda_decode_step", "'slots'", "dtype i32/i64", "f32");
  EXPECT_KIMI_ERROR(kda_decode_step(gpu_args(on(i32x4, gpu))), "'slots'", "shape [3]", "[4]");
  EXPECT_KIMI_ERROR(kda_decode_step(gpu_args(on(i32x31, gpu))), "'slots'", "1 dimensions", "2");
  EXPECT_KIMI_ERROR(kda_decode_step(gpu_args(on(i32, Device::cuda(1)))), "'slots'", "cuda:0", "cuda:1");
  const TensorView in_y(s.y.data(), DType::i32, {3}, gpu);  // slots inside y's memory
  EXPECT_KIMI_ERROR(kda_decode_step(gpu_args(in_y)), "'y'", "disjoint from 'slots'");
  const TensorView in_state(s.state.data(), DType::i64, {3}, gpu);
  EXPECT_KIMI_ERROR(kda_decode_step(gpu_args(in_state)), "'state'", "disjoint from 'slots'");
  // CPU tensors take host slots only
  KdaDecodeArgs a = args_of(s, GateForm::bounded, StateLayout::kv, true);
  a.slots = on(i32, gpu);
  EXPECT_KIMI_ERROR(kda_decode_step(a), "'slots'", "device cpu", "cuda:0");
}

#ifdef KIMI_WITH_CUDA
using testutil::copy_to;
const auto values = testutil::host_values;

// Every tensor of the step (slots as i32) onto device d.
void move_to(Step& s, Device d) {
  for (Tensor* t : {&s.xq, &s.xk, &s.xv, &s.f, &s.b, &s.z, &s.wq, &s.wk, &s.wv, &s.cq, &s.ck, &s.cv, &s.A_log,
                    &s.dt_bias, &s.o_norm, &s.state, &s.slots, &s.y})
    *t = copy_to(*t, d);
}

// dst's per-token inputs (x_q, x_k, x_v, f, b, z) and slots <- src's (host), any device.
void set_inputs(Step& dst, const Step& src, const int32_t* slots) {
  const std::pair<Tensor*, const Tensor*> io[] = {{&dst.xq, &src.xq}, {&dst.xk, &src.xk}, {&dst.xv, &src.xv},
                                                  {&dst.f, &src.f},   {&dst.b, &src.b},   {&dst.z, &src.z}};
  for (const auto& [d, s] : io) copy(d->view(), s->view());
  Tensor h(DType::i32, {dst.N});
  std::memcpy(h.data(), slots, size_t(dst.N) * 4);
  copy(dst.slots.view(), h.view());
}

TEST(KdaDecodeStep, CudaGraphReplayMatchesEagerCalls) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (CUDA-graph capture of kda_decode_step needs one)";
  const Device gpu = Device::cuda(0);
  const int32_t slot_sets[3][3] = {{4, 0, 2}, {1, 3, 0}, {2, 4, 1}};  // new rows every replay
  const double tol = verify::tol_for(DType::f32);
  for (StateLayout layout : {StateLayout::kv, StateLayout::vk}) {
    for (bool gated : {true, false}) {
      const GateForm form = gated ? GateForm::bounded : GateForm::softplus;
      const std::string what = std::string(layout == StateLayout::kv ? "kv" : "vk") + (gated ? " gated" : "");
      Step cpu(DType::f32, layout, 21, 64, 128), graph(DType::f32, layout, 21, 64, 128), eager(DType::f32, layout, 21, 64, 128);
      move_to(graph, gpu), move_to(eager, gpu);
      cudaStream_t st = nullptr;
      ASSERT_EQ(cudaStreamCreate(&st), cudaSuccess);
      const Context ctx{st};
      // Capture once (nothing runs), with the device slots and inputs as buffers the replays refill.
      cudaGraph_t g = nullptr;
      cudaGraphExec_t ge = nullptr;
      ASSERT_EQ(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), cudaSuccess);
      try {
        kda_decode_step(args_of(graph, form, layout, gated), ctx);
      } catch (const Error& e) {
        ADD_FAILURE() << what << ": kda_decode_step threw inside capture: " << e.what();
      }
      ASSERT_EQ(cudaStreamEndCapture(st, &g), cudaSuccess) << what;
      ASSERT_EQ(cudaGraphInstantiate(&ge, g, 0), cudaSuccess) << what;
      for (int t = 0; t < 3; ++t) {
        const Step in(DType::f32, layout, 100 + uint64_t(t), 64, 128);
        for (Step* s : {&cpu, &graph, &eager}) set_inputs(*s, in, slot_sets[t]);
        kda_decode_step(args_of(cpu, form, layout, gated));
        kda_decode_step(args_of(eager, form, layout, gated), ctx);
        ASSERT_EQ(cudaGraphLaunch(ge, st), cudaSuccess);
        ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
        const Tensor yg = copy_to(graph.y, Device::cpu()), ye = copy_to(eager.y, Device::cpu());
        EXPECT_TRUE(same_bytes(yg, ye)) << what << " replay " << t;
        EXPECT_LE(verify::rel_err(values(yg), values(cpu.y)), tol) << what << " replay " << t;
      }
      const std::pair<const char*, std::array<const Tensor*, 3>> pools[] = {{"state", {&graph.state, &eager.state, &cpu.state}},
                                                                            {"cache_q", {&graph.cq, &eager.cq, &cpu.cq}},
                                                                            {"cache_k", {&graph.ck, &eager.ck, &cpu.ck}},
                                                                            {"cache_v", {&graph.cv, &eager.cv, &cpu.cv}}};
      for (const auto& [name, t] : pools) {
        const Tensor pg = copy_to(*t[0], Device::cpu()), pe = copy_to(*t[1], Device::cpu());
        EXPECT_TRUE(same_bytes(pg, pe)) << what << " " << name;
        EXPECT_LE(verify::rel_err(values(pg), values(*t[2])), tol) << what << " " << name;
      }
      cudaGraphExecDestroy(ge);
      cudaGraphDestroy(g);
      cudaStreamDestroy(st);
    }
  }
}

TEST(KdaDecodeStep, CudaDeviceSlotOutOfRangeSkipsItsSequence) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (device slots are read by the CUDA kernel)";
  for (StateLayout layout : {StateLayout::kv, StateLayout::vk}) {
    for (int32_t bad : {5, -1}) {
      const std::string what = std::string(layout == StateLayout::kv ? "kv" : "vk") + " slot " + std::to_string(bad);
      const Step fresh(DType::bf16, layout, 31), cpu(DType::bf16, layout, 31);
      Step gpu(DType::bf16, layout, 31);
      move_to(gpu, Device::cuda(0));
      const int32_t with_bad[3] = {4, bad, 2};  // the CPU reference runs {4, 0, 2}
      set_inputs(gpu, fresh, with_bad);
      kda_decode_step(args_of(cpu, GateForm::bounded, layout, true));  // reference for sequences 0 and 2
      kda_decode_step(args_of(gpu, GateForm::bounded, layout, true));
      const Tensor y = copy_to(gpu.y, Device::cpu());
      const int64_t Pv = gpu.H * gpu.V;
      const std::vector<double> yg = values(y), yc = values(cpu.y);
      for (int64_t n = 0; n < 3; ++n)
        for (int64_t c = 0; c < Pv; ++c) {
          const double got = yg[size_t(n * Pv + c)];
          if (n == 1) EXPECT_TRUE(std::isnan(got)) << what << " y[1, " << c << "] = " << got;
          else EXPECT_NEAR(got, yc[size_t(n * Pv + c)], 1e-2 * (1 + std::fabs(yc[size_t(n * Pv + c)]))) << what;
        }
      // pool rows: 4 and 2 as the CPU's, 0, 1, 3 untouched (the CPU step wrote row 0 for sequence 1)
      const std::pair<const Tensor*, const Tensor*> pools[] = {{&gpu.state, &cpu.state}, {&gpu.cq, &cpu.cq}, {&gpu.ck, &cpu.ck}, {&gpu.cv, &cpu.cv}};
      const Tensor* initial[] = {&fresh.state, &fresh.cq, &fresh.ck, &fresh.cv};
      for (size_t i = 0; i < std::size(pools); ++i) {
        const Tensor got = copy_to(*pools[i].first, Device::cpu());
        const size_t row = got.nbytes() / size_t(gpu.S), nrow = row / 4;
        const std::vector<double> g = values(got), c = values(*pools[i].second);
        for (int64_t r : {0, 1, 3})
          EXPECT_EQ(std::memcmp(static_cast<const char*>(got.data()) + r * row,
                                static_cast<const char*>(initial[i]->data()) + r * row, row), 0) << what << " pool " << i << " row " << r;
        for (int64_t r : {2, 4})
          for (size_t e = 0; e < nrow; ++e)
            EXPECT_NEAR(g[r * nrow + e], c[r * nrow + e], 1e-4 * (1 + std::fabs(c[r * nrow + e]))) << what << " pool " << i << " row " << r;
      }
    }
  }
}

// The launcher picks the bulk (shared-memory streaming) kernels or the register kernels by the pool's alignment
// and, for the kv layout, the grid size (decode_step.cu). Every kda_decode_step harness case runs through each
// family here, so both stay covered whatever the cases' grid sizes are (the harness runs the launcher's choice).
TEST(KdaDecodeStep, CudaBothKernelFamiliesMatchTheOracle) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  for (const cuda::KdaDecodePath path : {cuda::KdaDecodePath::bulk, cuda::KdaDecodePath::registers}) {
    // the harness cases call kimi::kda_decode_step: the family forced on this thread for this scope
    cuda::KdaLaunchRecord ran;
    const cuda::ScopedKdaLaunchOptions force({.decode = path, .record = &ran});
    const bool bulk = path == cuda::KdaDecodePath::bulk;
    int n = 0;
    for (const verify::Case& c : verify::all_cases(verify::Scale::test)) {
      if (c.op != "kda_decode_step") continue;
      ++n;
      const verify::Result r = c.run(Device::cuda(0));
      SCOPED_TRACE(std::string(bulk ? "bulk" : "registers") + " " + c.shape + " " + r.detail);
      EXPECT_TRUE(r.finite);
      EXPECT_TRUE(r.guards_ok);
      EXPECT_LE(r.err, c.tol);
    }
    EXPECT_GE(n, 20);
    EXPECT_GT(bulk ? ran.decode_bulk : ran.decode_registers, 0) << (bulk ? "bulk" : "registers");
    if (!bulk) {
      EXPECT_EQ(ran.decode_bulk, 0);
    }
  }
}
#endif  // KIMI_WITH_CUDA

}  // namespace
}  // namespace kimi
