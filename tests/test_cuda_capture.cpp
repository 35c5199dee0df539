// The operators a decode step calls, captured in a CUDA graph (the runtime's planned step replays one): the row-wise
// kernels (norms, KDA gate / beta: row offsets from the views' strides, nothing uploaded), attn_res (its candidate
// table in the kernel's parameters) and the index arguments'
// device form (src/core/index.h: gather_rows' rows, mla_cache_write's start / slots, mla_decode's lens / slots, read by
// the kernels). Each is captured on a non-default stream, replayed with new values written into the same input and
// index tensors, and compared bit for bit with eager calls on the host form; out-of-range device values follow each
// operator's documented rule. Compiled in CUDA builds only (tests/cuda_tests.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "kimi/device.h"
#include "kimi/ops/attn_res.h"
#include "kimi/ops/gather.h"
#include "kimi/ops/kda.h"
#include "kimi/ops/mla.h"
#include "kimi/ops/norm.h"
#include "tensor_testutil.h"

#ifdef KIMI_WITH_CUDA
#include <cuda_runtime.h>

namespace kimi {
namespace {

using testutil::copy_to;
using testutil::host_values;
using testutil::ints;

const Device gpu = Device::cuda(0);

Tensor uniform(DType dt, std::vector<int64_t> shape, std::mt19937_64& rng, double lo, double hi, Device d = gpu) {
  Tensor h(dt, std::span<const int64_t>(shape));
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < h.numel(); ++i) store_from_f32(h.data(), dt, i, float(u(rng)));
  return d.type == DeviceType::cpu ? std::move(h) : copy_to(h, d);
}

// Overwrites a device tensor with host values of the same shape (between replays: the graph reads the same memory).
void refill(Tensor& dst, const Tensor& host) { copy(dst.view(), host.view()); }

// Runs fn once captured into a graph on a fresh non-blocking stream (the capture must succeed), then `replays` times:
// before replay r, prepare(r) rewrites the inputs in place and check(r) compares the outputs with eager results.
struct Captured {
  cudaStream_t s = nullptr;
  cudaGraphExec_t exec = nullptr;
  explicit Captured(const std::function<void(const Context&)>& fn) {
    EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    Context ctx;
    ctx.cuda_stream = s;
    cudaGraph_t g = nullptr;
    EXPECT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    fn(ctx);
    EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
    EXPECT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
    cudaGraphDestroy(g);
  }
  void replay() {
    EXPECT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  }
  ~Captured() {
    if (exec) cudaGraphExecDestroy(exec);
    if (s) cudaStreamDestroy(s);
  }
};

size_t mismatches(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = host_values(a), y = host_values(b);
  size_t bad = x.size() != y.size();
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) bad += !(x[i] == y[i] || (std::isnan(x[i]) && std::isnan(y[i])));
  return bad;
}

class CudaCapture : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (these run on the GPU machine)";
  }
};

// rms_norm, gated_rms_norm, l2_norm, kda_gate, kda_beta on strided 3-d views ([T, H, D] slices of wider rows).
TEST_F(CudaCapture, RowWiseKernelsReplayBitIdentically) {
  std::mt19937_64 rng(5);
  const int64_t T = 7, H = 3, D = 64;
  Tensor xw = uniform(DType::bf16, {T, H, D + 8}, rng, -2, 2), zw = uniform(DType::bf16, {T, H, D + 8}, rng, -2, 2);
  const TensorView x = xw.view().slice(2, 0, D), z = zw.view().slice(2, 0, D);
  const Tensor w = uniform(DType::f32, {D}, rng, 0.5, 1.5), A = uniform(DType::f32, {H}, rng, -1, 1);
  const Tensor dt_bias = uniform(DType::f32, {H * D}, rng, -1, 1);
  Tensor bw = uniform(DType::bf16, {T, H + 2}, rng, -3, 3);
  const TensorView b = bw.view().slice(1, 0, H);
  Tensor y1(DType::f32, {T, H, D}, gpu), y2(DType::bf16, {T, H, D}, gpu), y3(DType::f32, {T, H, D}, gpu);
  Tensor g(DType::f32, {T, H, D}, gpu), beta(DType::f32, {T, H}, gpu);
  const KdaGate gate{GateForm::bounded, A, dt_bias, -5.f};
  const auto all = [&](const Context& ctx) {
    rms_norm(x, w, 1e-5f, y1, ctx);
    gated_rms_norm(x, z, w, 1e-5f, y2, ctx);
    l2_norm(x, y3, 1e-6f, ctx);
    kda_gate(x, gate, g, ctx);
    kda_beta(b, beta, ctx);
  };
  Captured graph(all);
  for (int r = 0; r < 2; ++r) {
    refill(xw, uniform(DType::bf16, {T, H, D + 8}, rng, -2, 2, Device::cpu()));
    refill(bw, uniform(DType::bf16, {T, H + 2}, rng, -3, 3, Device::cpu()));
    graph.replay();
    const Tensor c1 = copy_to(y1, gpu), c2 = copy_to(y2, gpu), c3 = copy_to(y3, gpu), cg = copy_to(g, gpu),
                 cb = copy_to(beta, gpu);
    all(Context{});
    synchronize(gpu);
    EXPECT_EQ(mismatches(c1, y1), 0u) << "rms_norm, replay " << r;
    EXPECT_EQ(mismatches(c2, y2), 0u) << "gated_rms_norm, replay " << r;
    EXPECT_EQ(mismatches(c3, y3), 0u) << "l2_norm, replay " << r;
    EXPECT_EQ(mismatches(cg, g), 0u) << "kda_gate, replay " << r;
    EXPECT_EQ(mismatches(cb, beta), 0u) << "kda_beta, replay " << r;
  }
}

// attn_res (K3's Block AttnRes mix) with its candidate table in the kernel's parameters: captured with 3 blocks of
// mixed dtypes and strided rows, replayed on new block and partial values, equal to eager calls.
TEST_F(CudaCapture, AttnResReplaysBitIdentically) {
  std::mt19937_64 rng(9);
  const int64_t T = 5, d = 96;
  Tensor b0 = uniform(DType::f32, {T, d}, rng, -2, 2), b1 = uniform(DType::bf16, {T, d + 32}, rng, -2, 2),
         b2 = uniform(DType::f32, {T, d}, rng, -2, 2), partial = uniform(DType::f32, {T, d}, rng, -2, 2);
  const std::vector<TensorView> blocks = {b0.view(), b1.view().slice(1, 0, d), b2.view()};
  const Tensor proj = uniform(DType::bf16, {d}, rng, -1, 1), norm = uniform(DType::bf16, {d}, rng, 0.5, 1.5);
  Tensor out(DType::f32, {T, d}, gpu);
  const auto mix = [&](const Context& ctx) { attn_res(partial, blocks, proj, norm, 1e-6f, out, ctx); };
  Captured graph(mix);
  for (int r = 0; r < 2; ++r) {
    refill(b1, uniform(DType::bf16, {T, d + 32}, rng, -2, 2, Device::cpu()));
    refill(partial, uniform(DType::f32, {T, d}, rng, -2, 2, Device::cpu()));
    graph.replay();
    const Tensor replayed = copy_to(out, gpu);
    mix(Context{});
    synchronize(gpu);
    EXPECT_EQ(mismatches(replayed, out), 0u) << "attn_res, replay " << r;
  }
}

// gather_rows with device rows (i32 and i64): captured, replayed on new rows, equal to the host form; a row outside
// [0, R) gives a NaN row.
TEST_F(CudaCapture, GatherRowsDeviceRows) {
  std::mt19937_64 rng(6);
  const int64_t R = 50, D = 96, N = 5;
  const Tensor src = uniform(DType::bf16, {R, D}, rng, -1, 1);
  for (const DType it : {DType::i32, DType::i64}) {
    Tensor rows = ints(it, {3, 49, 0, 3, 17}, gpu);
    Tensor out(DType::f32, {N, D}, gpu), ref(DType::f32, {N, D}, gpu);
    Captured graph([&](const Context& ctx) { gather_rows(src, rows, out, ctx); });
    for (const std::vector<int64_t>& v : {std::vector<int64_t>{1, 2, 3, 4, 5}, std::vector<int64_t>{49, 0, 49, 7, 7}}) {
      refill(rows, ints(it, v, Device::cpu()));
      graph.replay();
      gather_rows(src, ints(it, v, Device::cpu()), ref);
      EXPECT_EQ(mismatches(out, ref), 0u) << dtype_name(it) << " rows";
    }
    refill(rows, ints(it, {1, R, -1, 2, 3}, Device::cpu()));
    graph.replay();
    const std::vector<double> o = host_values(out);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t d = 0; d < D; ++d)
        EXPECT_EQ(std::isnan(o[size_t(n * D + d)]), n == 1 || n == 2) << "row " << n << " col " << d;
  }
}

// mla_cache_write then mla_decode with device start / slots / lens (a decode step's MLA): captured, replayed as the
// sequences grow by one token per replay, equal to the host form bit for bit; out-of-range values: no cache write,
// NaN outputs for that sequence only.
TEST_F(CudaCapture, MlaDecodeStepDeviceIndices) {
  std::mt19937_64 rng(7);
  const int64_t N = 3, Nc = 5, L = 40, H = 4, R = 64, P = 16, Dn = 32, Dv = 32;
  Tensor cache_g = uniform(DType::bf16, {Nc, L, R + P}, rng, -1, 1), cache_h = copy_to(cache_g, gpu);
  const Tensor w = uniform(DType::bf16, {H * (Dn + Dv), R}, rng, -0.2, 0.2);
  Tensor q = uniform(DType::bf16, {N, H, Dn + P}, rng, -1, 1), lat = uniform(DType::bf16, {N, 1, R}, rng, -1, 1);
  Tensor pe = uniform(DType::bf16, {N, 1, P}, rng, -1, 1), gate = uniform(DType::bf16, {N, H * Dv}, rng, -2, 2);
  std::vector<int64_t> slot{4, 0, 2}, start{10, 3, 25};
  Tensor d_start = ints(DType::i64, start, gpu), d_slots = ints(DType::i32, slot, gpu);
  const auto lens_of = [&](const std::vector<int64_t>& st) {
    std::vector<int64_t> l;
    for (int64_t s : st) l.push_back(s + 1);
    return l;
  };
  Tensor d_lens = ints(DType::i32, lens_of(start), gpu);
  Tensor o(DType::f32, {N, H, Dv}, gpu), ref(DType::f32, {N, H, Dv}, gpu);
  const auto step = [&](const Context& ctx) {
    mla_cache_write(lat.view().slice(0, 0, N), pe, cache_g, d_start, d_slots, ctx);
    mla_decode(q, cache_g, d_lens, d_slots, Weight{w, {}}, gate, std::nullopt, o, ctx);
  };
  Captured graph(step);
  for (int r = 0; r < 3; ++r) {  // replay 0 repeats the captured values; then every sequence advances one token
    if (r > 0)
      for (int64_t& s : start) ++s;
    refill(d_start, ints(DType::i64, start, Device::cpu()));
    refill(d_lens, ints(DType::i32, lens_of(start), Device::cpu()));
    refill(q, uniform(DType::bf16, {N, H, Dn + P}, rng, -1, 1, Device::cpu()));
    refill(lat, uniform(DType::bf16, {N, 1, R}, rng, -1, 1, Device::cpu()));
    graph.replay();
    mla_cache_write(lat, pe, cache_h, ints(DType::i64, start, Device::cpu()), ints(DType::i32, slot, Device::cpu()));
    mla_decode(q, cache_h, ints(DType::i32, lens_of(start), Device::cpu()), ints(DType::i32, slot, Device::cpu()),
               Weight{w, {}}, gate, std::nullopt, ref);
    EXPECT_EQ(mismatches(cache_g, cache_h), 0u) << "cache after replay " << r;
    EXPECT_EQ(mismatches(o, ref), 0u) << "o after replay " << r;
  }
  // sequence 1 out of range (start + 1 > L, length > L): its cache rows untouched, its o NaN, the others as before
  const Tensor before = copy_to(cache_g, gpu);
  std::vector<int64_t> bad = start;
  bad[1] = L;
  refill(d_start, ints(DType::i64, bad, Device::cpu()));
  refill(d_lens, ints(DType::i32, lens_of(bad), Device::cpu()));
  graph.replay();
  const std::vector<double> c0 = host_values(before), c1 = host_values(cache_g), ov = host_values(o);
  const int64_t row = L * (R + P);
  for (int64_t e = 0; e < row; ++e) ASSERT_EQ(c1[size_t(slot[1] * row + e)], c0[size_t(slot[1] * row + e)]) << e;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t e = 0; e < H * Dv; ++e) EXPECT_EQ(std::isnan(ov[size_t(n * H * Dv + e)]), n == 1) << n << " " << e;
}

}  // namespace
}  // namespace kimi
#endif  // KIMI_WITH_CUDA
