// GPU benchmark: KDA chunkwise forward (prefill) through the public API on CUDA tensors, CUDA events,
// median of 50 timed launches after 10 warm-ups. BENCH.md shapes (sequences x T, H, K = V = 128):
// 1x16384 H64, 1x8192 H64, 1x65536 H32, 8x4096 varlen H32, 1x65536 H8, 10x819 varlen H64.
// Then the softplus (Kimi-Linear) gate on the first and third shapes: issue 3 asks for it within 1.5x of the
// bounded gate's time (the softplus gate takes the per-pair fp32 path for the diagonal blocks, chunk.cu).
// Inputs: bf16 q, k, v, raw gate (fused bounded gate, lower bound -5, or softplus), raw beta (sigmoid in kernel), L2 norm in
// kernel, vk (V-first) fp32 state, initial + final state (updated in place). Prints the time and the fraction of
// the memory floor: bytes of q, k, v, raw g, beta, o (bf16) and the state read + written, over 4.25 TB/s.
// Arguments: [shape index 0-7] [seg=off|auto|<chunks>] (the launcher's sequence parallelism,
// kimi::cuda::KdaLaunchOptions::segment_chunks: off gives the plain walk, for before / after in one run; the segment
// length used is printed) [o=f32|o=bf16] (o's dtype, default bf16; an fp32 o cannot take walk_rs.cuh's O stage, which
// needs bf16 rows: the O epilogue used is printed, "o stage" or "o stores"). The options reach the launcher through
// kimi::kda_chunk_fwd (the product's call path) by kimi::cuda::ScopedKdaLaunchOptions.
// Run beside bench/peers/fla_kda_prefill.py (same shapes, same options) in one command on the GPU machine.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "bench_util.h"
#include "cuda/kda/chunk.h"
#include "kimi/device.h"
#include "kimi/ops/kda.h"

namespace {

using kimi::bench::DevBuf;
using kimi::bench::kCopyBytesPerS;
using kimi::bench::random_bf16;
using kimi::bench::random_f32;

// nseq sequences of T tokens each; varlen packs them into B = 1 with cu_seqlens (host i32, as the API takes it).
// o_f32: an fp32 o (the inputs stay bf16: the tensor-core path), else bf16.
void run(int nseq, int T, int H, bool varlen, kimi::GateForm form, bool o_f32, int64_t segment_chunks) {
  using kimi::DType;
  constexpr int K = 128, V = 128;
  std::mt19937 rng(42);
  const int B = varlen ? 1 : nseq, TT = varlen ? nseq * T : T;
  const size_t tokens = size_t(nseq) * T;
  const size_t nqk = tokens * H * K, nv = tokens * H * V, nb = tokens * H;
  const size_t ns = size_t(nseq) * H * K * V;
  DevBuf q(nqk * 2, random_bf16(nqk, rng, -1, 1)), k(nqk * 2, random_bf16(nqk, rng, -1, 1));
  DevBuf v(nv * 2, random_bf16(nv, rng, -1, 1)), g(nqk * 2, random_bf16(nqk, rng, -8, 8));
  DevBuf b(nb * 2, random_bf16(nb, rng, -4, 4)), o(nv * (o_f32 ? 4 : 2), {});
  DevBuf A(size_t(H) * 4, random_f32(size_t(H), rng, -2, 1));
  DevBuf dt(size_t(H) * K * 4, random_f32(size_t(H) * K, rng, -2, 2));
  DevBuf s(ns * 4, random_f32(ns, rng, -0.1f, 0.1f));
  const kimi::Device dev = kimi::Device::cuda(0);
  kimi::KdaArgs a;
  a.q = kimi::TensorView(q.p, DType::bf16, {B, TT, H, K}, dev);
  a.k = kimi::TensorView(k.p, DType::bf16, {B, TT, H, K}, dev);
  a.v = kimi::TensorView(v.p, DType::bf16, {B, TT, H, V}, dev);
  a.g = kimi::TensorView(g.p, DType::bf16, {B, TT, H, K}, dev);
  a.beta = kimi::TensorView(b.p, DType::bf16, {B, TT, H}, dev);
  a.o = kimi::TensorView(o.p, o_f32 ? DType::f32 : DType::bf16, {B, TT, H, V}, dev);
  a.gate = kimi::KdaGate{form, kimi::TensorView(A.p, DType::f32, {H}, dev),
                         kimi::TensorView(dt.p, DType::f32, {int64_t(H) * K}, dev), -5.f};
  a.beta_sigmoid_in_kernel = true;
  a.qk_l2norm_in_kernel = true;
  a.state_layout = kimi::StateLayout::vk;
  a.initial_state = kimi::TensorView(s.p, DType::f32, {nseq, H, V, K}, dev);
  a.final_state = a.initial_state;
  std::vector<int32_t> cu;
  for (int i = 0; i <= nseq; ++i) cu.push_back(int32_t(i) * T);
  if (varlen) a.cu_seqlens = kimi::TensorView(cu.data(), DType::i32, {int64_t(nseq) + 1});

  kimi::cuda::KdaLaunchRecord ran;
  double med = 0;
  {
    const kimi::cuda::ScopedKdaLaunchOptions options({.segment_chunks = segment_chunks, .record = &ran});
    med = kimi::bench::median_ms([&] { kimi::kda_chunk_fwd(a); }, 10, 50);
  }
  // q, k, v, raw g, beta read (bf16) and o written, state read + written (fp32)
  const double bytes =
      double(nqk) * 2 * 3 + double(nv) * 2 + double(nb) * 2 + double(nv) * (o_f32 ? 4 : 2) + double(ns) * 4 * 2;
  const double floor_ms = bytes / kCopyBytesPerS * 1e3;
  std::printf(
      "kimi kda_chunk_fwd %2d x %5d%s H=%2d K=V=128 %-8s %s vk  %8.3f ms  floor %.3f ms (%.1f%% of floor)"
      "  seg %lld  %s\n",
      nseq, T, varlen ? " varlen" : "       ", H, form == kimi::GateForm::bounded ? "bounded" : "softplus",
      o_f32 ? "bf16, f32 o" : "bf16", med,
      floor_ms, 100.0 * floor_ms / med, static_cast<long long>(ran.segment_chunks),
      ran.o_staged ? "o stage" : "o stores");
}

}  // namespace

// Optional argument: the index (0-7) of the one shape to run (for profiling a single shape).
int main(int argc, char** argv) {
  if (kimi::cuda_device_count() == 0) {
    std::fprintf(stderr, "no CUDA device\n");
    return 1;
  }
  struct Shape {
    int nseq, T, H;
    bool varlen;
    kimi::GateForm form = kimi::GateForm::bounded;
  };
  constexpr auto softplus = kimi::GateForm::softplus;
  const Shape shapes[] = {{1, 16384, 64, false}, {1, 8192, 64, false}, {1, 65536, 32, false},
                          {8, 4096, 32, true},   {1, 65536, 8, false},  {10, 819, 64, true},
                          {1, 16384, 64, false, softplus}, {1, 65536, 32, false, softplus}};
  int only = -1;
  bool o_f32 = false;
  int64_t segment_chunks = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "o=f32") == 0 || std::strcmp(argv[i], "o=bf16") == 0) {
      o_f32 = argv[i][2] == 'f';
    } else if (std::strncmp(argv[i], "seg=", 4) == 0) {
      const char* m = argv[i] + 4;
      segment_chunks = std::strcmp(m, "off") == 0 ? -1 : std::strcmp(m, "auto") == 0 ? 0 : std::atoll(m);
    } else if (argv[i][0] >= '0' && argv[i][0] <= '9' && std::atoi(argv[i]) < int(std::size(shapes))) {
      only = std::atoi(argv[i]);
    } else {
      std::fprintf(stderr, "%s: expected a shape index 0-%d, seg=off|auto|<chunks> or o=f32|o=bf16\n", argv[i],
                   int(std::size(shapes)) - 1);
      return 2;
    }
  }
  for (int i = 0; i < int(std::size(shapes)); ++i)
    if (only < 0 || only == i) run(shapes[i].nseq, shapes[i].T, shapes[i].H, shapes[i].varlen, shapes[i].form, o_f32,
                                     segment_chunks);
  return 0;
}
