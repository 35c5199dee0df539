// GPU benchmark: KDA recurrent forward (decode, T = 1, and short T) through the public API on CUDA
// tensors, CUDA events, median of 100 timed launches after 20 warm-ups, and per call in a graph of 20 calls.
// Inputs: bf16 q, k, v, raw gate (fused bounded gate, lower bound -5), raw beta (sigmoid in kernel), L2 norm in
// kernel, fp32 state updated in place (initial = final). Prints time and state traffic (K*V*4 bytes read + written
// per sequence-head).
// Run beside bench/peers/fla_kda.py (same shapes, same options) in one command: scripts/gpu/run_all.sh.
// `kimi_bench_kda_decode step B H kv|vk`: only that decode-step line (e.g. under ncu: a profile of one shape).
// The kda_recurrent_fwd lines come three times per shape: the launcher's choice (path=auto), then each one-token
// kernel family forced (path=stream / staged, kimi::cuda::KdaLaunchOptions::one_token).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench_util.h"
#include "cuda/kda/kda.h"
#include "kimi/device.h"
#include "kimi/ops/kda.h"
#include "kimi/ops/kda_decode.h"

namespace {

using kimi::bench::DevBuf;
using kimi::bench::random_bf16;
using kimi::bench::random_f32;

// Median time of one replay of a CUDA graph holding `calls` consecutive calls of fn(ctx) captured on a fresh stream,
// per call: back-to-back kernels, the host's launch cost and the graph launch amortized (how the operator runs
// inside a model's decode graph).
template <class F>
double graph_ms_per_call(F&& fn, int calls) {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const kimi::Context ctx{s};
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < calls; ++i) fn(ctx);
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  const double ms = kimi::bench::median_ms([&] { CK(cudaGraphLaunch(ge, s)); }, 20, calls == 1 ? 200 : 50, s);
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  CK(cudaStreamDestroy(s));
  return ms / calls;
}

// path: the one-token kernel family (T = 1 only; kimi::cuda::KdaLaunchOptions::one_token), forced for the calls
// through kimi::kda_recurrent_fwd below by a scoped option (the same public-API path as the product's calls).
void run(int B, int T, int H, int K, int V, kimi::StateLayout layout,
         kimi::cuda::KdaOneTokenPath path = kimi::cuda::KdaOneTokenPath::automatic) {
  using kimi::DType;
  std::mt19937 rng(42);
  const size_t nqk = size_t(B) * T * H * K, nv = size_t(B) * T * H * V, nb = size_t(B) * T * H;
  const size_t ns = size_t(B) * H * K * V;
  DevBuf q(nqk * 2, random_bf16(nqk, rng, -1, 1)), k(nqk * 2, random_bf16(nqk, rng, -1, 1));
  DevBuf v(nv * 2, random_bf16(nv, rng, -1, 1)), g(nqk * 2, random_bf16(nqk, rng, -8, 8));
  DevBuf b(nb * 2, random_bf16(nb, rng, -4, 4)), o(nv * 2, {});
  DevBuf A(size_t(H) * 4, random_f32(size_t(H), rng, -2, 1)), dt(size_t(H) * K * 4, random_f32(size_t(H) * K, rng, -2, 2));
  DevBuf s(ns * 4, random_f32(ns, rng, -0.1f, 0.1f));
  const kimi::Device dev = kimi::Device::cuda(0);
  kimi::KdaArgs a;
  a.q = kimi::TensorView(q.p, DType::bf16, {B, T, H, K}, dev);
  a.k = kimi::TensorView(k.p, DType::bf16, {B, T, H, K}, dev);
  a.v = kimi::TensorView(v.p, DType::bf16, {B, T, H, V}, dev);
  a.g = kimi::TensorView(g.p, DType::bf16, {B, T, H, K}, dev);
  a.beta = kimi::TensorView(b.p, DType::bf16, {B, T, H}, dev);
  a.o = kimi::TensorView(o.p, DType::bf16, {B, T, H, V}, dev);
  a.gate = kimi::KdaGate{kimi::GateForm::bounded, kimi::TensorView(A.p, DType::f32, {H}, dev),
                         kimi::TensorView(dt.p, DType::f32, {int64_t(H) * K}, dev), -5.f};
  a.beta_sigmoid_in_kernel = true;
  a.qk_l2norm_in_kernel = true;
  a.state_layout = layout;
  const bool vk = layout == kimi::StateLayout::vk;
  a.initial_state = kimi::TensorView(s.p, DType::f32, {B, H, vk ? V : K, vk ? K : V}, dev);
  a.final_state = a.initial_state;
  double med = 0, in_graph = 0;
  {
    const kimi::cuda::ScopedKdaLaunchOptions force({.one_token = path});
    med = kimi::bench::median_ms([&] { kimi::kda_recurrent_fwd(a); }, 20, 100);
    in_graph = graph_ms_per_call([&](const kimi::Context& ctx) { kimi::kda_recurrent_fwd(a, ctx); }, 20);
  }
  using P = kimi::cuda::KdaOneTokenPath;
  const double state_bytes = double(ns) * 4 * 2;
  std::printf("kimi kda_recurrent_fwd B=%d T=%d H=%d K=%d V=%d layout=%s path=%s  %.4f ms  state %.2f TB/s"
              "  20-call graph %.4f ms/call  %.2f TB/s\n",
              B, T, H, K, V, vk ? "vk" : "kv", path == P::streaming ? "stream" : path == P::staged ? "staged" : "auto", med,
              state_bytes / (med * 1e-3) / 1e12, in_graph, state_bytes / (in_graph * 1e-3) / 1e12);
}

// kda_decode_step: one whole KDA layer's decode token (3 conv updates, gate, beta, L2 norm, recurrence on
// slot-indexed pools, gated RMSNorm; one fused kernel) for B sequences in a pool of 2B rows (every other row).
// Timed eagerly (host slots, legacy stream) and as a CUDA graph captured once with the slots on the device and
// replayed (median of single replays; the target's number), and per step in a graph of 20 steps (back-to-back
// kernels, the graph launch amortized). State TB/s = K*V*4 bytes read + written per sequence-head / graph replay
// time. main also prints the floor: the replay of a graph holding one 4-byte memset.
void run_step(int B, int H, int K, kimi::StateLayout layout) {
  using kimi::DType;
  std::mt19937 rng(43);
  const int64_t P = int64_t(H) * K, S = 2 * int64_t(B), W = 4;
  const size_t nx = size_t(B) * P, ns = size_t(S) * H * K * K, nc = size_t(S) * P * (W - 1);
  DevBuf xq(nx * 2, random_bf16(nx, rng, -1, 1)), xk(nx * 2, random_bf16(nx, rng, -1, 1)), xv(nx * 2, random_bf16(nx, rng, -1, 1));
  DevBuf f(nx * 2, random_bf16(nx, rng, -8, 8)), z(nx * 2, random_bf16(nx, rng, -4, 4)), y(nx * 2, {});
  DevBuf b(size_t(B) * H * 2, random_bf16(size_t(B) * H, rng, -4, 4));
  DevBuf wq(size_t(P * W) * 4, random_f32(size_t(P * W), rng, -0.5f, 0.5f)), wk(size_t(P * W) * 4, random_f32(size_t(P * W), rng, -0.5f, 0.5f)),
      wv(size_t(P * W) * 4, random_f32(size_t(P * W), rng, -0.5f, 0.5f));
  DevBuf cq(nc * 4, random_f32(nc, rng, -1, 1)), ck(nc * 4, random_f32(nc, rng, -1, 1)), cv(nc * 4, random_f32(nc, rng, -1, 1));
  DevBuf A(size_t(H) * 4, random_f32(size_t(H), rng, -2, 1)), dt(size_t(P) * 4, random_f32(size_t(P), rng, -2, 2));
  DevBuf on(size_t(K) * 4, random_f32(size_t(K), rng, 0.5f, 1.5f)), st(ns * 4, random_f32(ns, rng, -0.1f, 0.1f));
  const kimi::Device dev = kimi::Device::cuda(0);
  std::vector<int64_t> slot(static_cast<size_t>(B));
  for (int n = 0; n < B; ++n) slot[size_t(n)] = 2 * n + 1;
  std::vector<uint8_t> slot_bytes(slot.size() * 8);
  std::memcpy(slot_bytes.data(), slot.data(), slot_bytes.size());
  DevBuf dslot(slot_bytes.size(), slot_bytes);
  kimi::KdaDecodeArgs a;
  a.x_q = kimi::TensorView(xq.p, DType::bf16, {B, P}, dev), a.x_k = kimi::TensorView(xk.p, DType::bf16, {B, P}, dev);
  a.x_v = kimi::TensorView(xv.p, DType::bf16, {B, P}, dev), a.f = kimi::TensorView(f.p, DType::bf16, {B, P}, dev);
  a.z = kimi::TensorView(z.p, DType::bf16, {B, P}, dev), a.y = kimi::TensorView(y.p, DType::bf16, {B, P}, dev);
  a.b = kimi::TensorView(b.p, DType::bf16, {B, H}, dev);
  a.conv_q = kimi::TensorView(wq.p, DType::f32, {P, 1, W}, dev), a.conv_k = kimi::TensorView(wk.p, DType::f32, {P, 1, W}, dev);
  a.conv_v = kimi::TensorView(wv.p, DType::f32, {P, 1, W}, dev);
  a.cache_q = kimi::TensorView(cq.p, DType::f32, {S, P, W - 1}, dev), a.cache_k = kimi::TensorView(ck.p, DType::f32, {S, P, W - 1}, dev);
  a.cache_v = kimi::TensorView(cv.p, DType::f32, {S, P, W - 1}, dev);
  a.gate = kimi::KdaGate{kimi::GateForm::bounded, kimi::TensorView(A.p, DType::f32, {H}, dev),
                         kimi::TensorView(dt.p, DType::f32, {P}, dev), -5.f};
  a.o_norm = kimi::TensorView(on.p, DType::f32, {K}, dev);
  a.state = kimi::TensorView(st.p, DType::f32, {S, H, K, K}, dev);
  a.state_layout = layout;
  a.slots = kimi::TensorView(slot.data(), DType::i64, {B});
  const double eager = kimi::bench::median_ms([&] { kimi::kda_decode_step(a); }, 20, 100);

  a.slots = kimi::TensorView(dslot.p, DType::i64, {B}, dev);  // device slots: capturable
  // One step per graph (the number compared with the target), and kSteps steps per graph (back-to-back
  // kernels: per-step time without the graph launch).
  constexpr int kSteps = 20;
  const auto step = [&](const kimi::Context& ctx) { kimi::kda_decode_step(a, ctx); };
  const double graph = graph_ms_per_call(step, 1), graph_n = graph_ms_per_call(step, kSteps);
  const double state_bytes = double(B) * H * K * K * 4 * 2;
  std::printf("kimi kda_decode_step B=%d H=%d K=V=%d %s pool=%lld  eager %.4f ms  graph replay %.4f ms  state %.2f TB/s (graph)"
              "  %d-step graph %.4f ms/step%s\n",
              B, H, K, layout == kimi::StateLayout::vk ? "vk" : "kv", (long long)S, eager, graph,
              state_bytes / (graph * 1e-3) / 1e12, kSteps, graph_n, B == 1 && H == 96 ? "  (target <= 0.010 ms in a graph)" : "");
}

}  // namespace

int main(int argc, char** argv) {
  if (kimi::cuda_device_count() == 0) {
    std::fprintf(stderr, "no CUDA device\n");
    return 1;
  }
  if (argc > 1) {
    const std::string layout = argc == 5 ? argv[4] : "";
    if (argc != 5 || std::string(argv[1]) != "step" || (layout != "kv" && layout != "vk")) {
      std::fprintf(stderr, "usage: %s [step B H kv|vk]\n", argv[0]);
      return 2;
    }
    const int B = std::atoi(argv[2]), H = std::atoi(argv[3]);
    if (B < 1 || H < 1) {
      std::fprintf(stderr, "step: B and H must be positive, got %s %s\n", argv[2], argv[3]);
      return 2;
    }
    run_step(B, H, 128, layout == "vk" ? kimi::StateLayout::vk : kimi::StateLayout::kv);
    return 0;
  }
  for (auto layout : {kimi::StateLayout::kv, kimi::StateLayout::vk}) {
    // the launcher's choice, then both one-token families (the data of recurrent.cu's use_stream rule)
    for (const auto path : {kimi::cuda::KdaOneTokenPath::automatic, kimi::cuda::KdaOneTokenPath::streaming,
                            kimi::cuda::KdaOneTokenPath::staged}) {
      run(1, 1, 32, 128, 128, layout, path);
      run(8, 1, 32, 128, 128, layout, path);
      run(16, 1, 32, 128, 128, layout, path);
      run(32, 1, 32, 128, 128, layout, path);
      run(256, 1, 32, 128, 128, layout, path);  // the >= 3.8 TB/s state-traffic target
      run(1, 1, 96, 128, 128, layout, path);    // one K3 layer, B = 1
      run(4, 1, 96, 128, 128, layout, path);
    }
  }
  {  // the floor: one graph replay of a 4-byte memset
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    DevBuf m(4, {});
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    CK(cudaMemsetAsync(m.p, 0, 4, s));
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    std::printf("graph replay of a 4-byte memset (the floor): %.4f ms\n",
                kimi::bench::median_ms([&] { CK(cudaGraphLaunch(ge, s)); }, 20, 200, s));
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    CK(cudaStreamDestroy(s));
  }
  for (auto layout : {kimi::StateLayout::kv, kimi::StateLayout::vk}) {
    run_step(1, 96, 128, layout);  // one K3 layer
    run_step(1, 32, 128, layout);
    run_step(32, 96, 128, layout);
    run_step(256, 32, 128, layout);  // large batch: the >= 3.8 TB/s state-traffic target
  }
  return 0;
}
