// CUDA-only properties of linear and the MoE family that the harness cannot express (values against the
// fp64 oracle run in the harness on every device): the decode projection records into a CUDA graph and
// replays bit-identically; expert_path's decode rule follows its options (src/cuda/moe/options.h: touched up to
// touched_max_tokens, forced paths, prefill untouched; no device needed); both decode paths of latent_moe (each
// forced, and checked to be what ran) match the CPU backend (T = 1 to 128, both models' layouts scaled down,
// ragged counts, experts without tokens, one expert taking every token, bf16 and MXFP4, SiLU and SiTU, the shared
// expert fused on the touched path) and their graphs replay bit-identically, the touched path's routing (inside its
// grouping launch) equals moe_router's bit for bit (also T up to 17, E up to 896, K up to 32, bias or not,
// renormalize on and off, ties and NaN logits) and beta 1 adds exactly the beta-0 output; the decode path
// (T * top_k <= 16 E, stacked experts) records into a CUDA graph (so it never waits on the host) and replays
// bit-identically, also on new inputs; stacked and separately allocated experts give identical bytes; graph
// capture is refused (leaving it valid) for separate experts and for the cuBLAS prefill path (f32 x; bf16 x with
// bf16 experts takes the capturable tensor-core path, tests/test_cuda_moe_grouped.cpp); experts of different
// widths or formats are refused; moe_quantile_balance is CPU-only.
// Skipped without a CUDA device (but the rule test).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "expect_error.h"
#include "kimi/device.h"
#include "kimi/ops/linear.h"
#include "kimi/ops/moe.h"
#include "tensor_testutil.h"

#ifdef KIMI_WITH_CUDA
#include <cuda_runtime.h>

#include "cuda/moe/experts.h"

namespace kimi {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device"

// A CUDA tensor holding uniform values in [lo, hi) (float dtypes) or random bytes (u8 in [lo, hi]).
Tensor gpu_random(DType dt, std::vector<int64_t> shape, std::mt19937_64& rng, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  Tensor d(dt, std::span<const int64_t>(shape), Device::cuda(0));
  if (dt == DType::u8) {
    Tensor b(DType::u8, std::span<const int64_t>(shape));
    for (int64_t i = 0; i < b.numel(); ++i) b.data_as<uint8_t>()[i] = uint8_t(u(rng));
    copy(d, b);
    return d;
  }
  Tensor c(dt, std::span<const int64_t>(shape));
  for (int64_t i = 0; i < c.numel(); ++i) {
    const float v = float(u(rng));
    if (dt == DType::f32) c.data_as<float>()[i] = v;
    else if (dt == DType::bf16) c.data_as<uint16_t>()[i] = f32_to_bf16(v);
    else c.data_as<uint16_t>()[i] = f32_to_f16(v);
  }
  copy(d, c);
  return d;
}

std::vector<uint8_t> bytes_of(const Tensor& d) {
  Tensor h(d.view().dtype, std::span<const int64_t>(d.view().shape.data(), size_t(d.view().ndim)));
  copy(h, d);
  return std::vector<uint8_t>(static_cast<uint8_t*>(h.data()), static_cast<uint8_t*>(h.data()) + h.nbytes());
}

TEST(CudaLinear, DecodeRecordsIntoAGraphAndReplaysBitIdentically) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(3);
  const Tensor x = gpu_random(DType::bf16, {3, 256}, rng, -1, 1);           // bf16 x: converted to f32 scratch
  const Tensor w = gpu_random(DType::bf16, {300, 256}, rng, -0.1, 0.1);
  const Tensor wp = gpu_random(DType::u8, {70, 128}, rng, 0, 255.99);       // MXFP4 [70, 256]
  const Tensor ws = gpu_random(DType::u8, {70, 8}, rng, 118, 124.99);
  const Tensor y1(DType::f32, {3, 300}, Device::cuda(0)), y2(DType::f32, {3, 300}, Device::cuda(0));
  const Tensor z1(DType::bf16, {3, 70}, Device::cuda(0)), z2(DType::bf16, {3, 70}, Device::cuda(0));
  linear(x, Weight{w, {}}, y1);
  linear(x, Weight{wp, ws}, z1);
  synchronize(Device::cuda(0));

  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  Context ctx;
  ctx.cuda_stream = s;
  cudaGraph_t g;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  linear(x, Weight{w, {}}, y2, 0.f, ctx);
  linear(x, Weight{wp, ws}, z2, 0.f, ctx);
  ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  cudaGraphExec_t ge;
  ASSERT_EQ(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(ge, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(bytes_of(y1), bytes_of(y2));
  EXPECT_EQ(bytes_of(z1), bytes_of(z2));
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
}

// The decode rule on the host (no device): E experts of [I, D] bf16 views that are never read (tensor-core
// weights: bf16 x may take the tensor cores, f32 x may not).
TEST(CudaMoe, ExpertPathDecodeRuleFollowsItsOptions) {
  using cuda::DecodeExpertPath;
  using cuda::ExpertPath;
  Tensor pool(DType::bf16, {3, 64, 64});
  const auto experts_of = [&](int64_t e_count) {
    std::vector<MlpWeights> v;
    for (int64_t e = 0; e < e_count; ++e) {
      const Weight w{TensorView(pool.data(), DType::bf16, {64, 64}, Device::cpu()), {}};
      v.push_back(MlpWeights{w, w, w});
    }
    return v;
  };
  const std::vector<MlpWeights> kl = experts_of(256), big = experts_of(cuda::kGroupMaxExperts + 1);
  const auto path = [&](int64_t t, const std::vector<MlpWeights>& ex, DType x = DType::bf16) {
    return cuda::expert_path(t, t * 8, x, ex);  // top-8
  };
  const int64_t n = cuda::expert_path_options().touched_max_tokens;  // the default threshold
  ASSERT_GE(n, 1);
  ASSERT_LT(n, 64);
  for (int64_t t = 1; t <= n; ++t) {
    EXPECT_EQ(path(t, kl), ExpertPath::touched) << "T=" << t;
    EXPECT_EQ(path(t, kl, DType::f32), ExpertPath::touched) << "T=" << t;
  }
  for (int64_t t : {n + 1, 2 * n + 1, int64_t(128), int64_t(512)}) {
    EXPECT_EQ(path(t, kl), ExpertPath::wgmma) << "T=" << t;
    EXPECT_EQ(path(t, kl, DType::f32), ExpertPath::grouped) << "T=" << t;
  }
  EXPECT_EQ(path(513, kl), ExpertPath::wgmma);            // 16.03 rows per expert: prefill
  EXPECT_EQ(path(513, kl, DType::f32), ExpertPath::gemm);
  EXPECT_EQ(path(1, big), ExpertPath::wgmma);             // past the one-block grouping
  EXPECT_EQ(path(1, big, DType::f32), ExpertPath::grouped);
  {
    const cuda::ScopedExpertPathOptions o(cuda::ExpertPathOptions{.touched_max_tokens = 2 * n});
    EXPECT_EQ(path(2 * n, kl), ExpertPath::touched);
    EXPECT_EQ(path(2 * n + 1, kl), ExpertPath::wgmma);
    {
      const cuda::ScopedExpertPathOptions inner(cuda::ExpertPathOptions{.decode = DecodeExpertPath::grouped});
      EXPECT_EQ(path(1, kl), ExpertPath::grouped);
      EXPECT_EQ(path(513, kl), ExpertPath::wgmma);  // prefill keeps its rule
    }
    EXPECT_EQ(path(2 * n, kl), ExpertPath::touched);  // the outer options again
  }
  {
    const cuda::ScopedExpertPathOptions o(cuda::ExpertPathOptions{.touched_max_tokens = 0});
    EXPECT_EQ(path(1, kl), ExpertPath::wgmma);
  }
  {
    const cuda::ScopedExpertPathOptions o(cuda::ExpertPathOptions{.decode = DecodeExpertPath::touched});
    EXPECT_EQ(path(512, kl), ExpertPath::touched);
    EXPECT_EQ(path(513, kl), ExpertPath::wgmma);  // prefill keeps its rule
    EXPECT_EQ(path(1, big), ExpertPath::wgmma);   // the touched path does not apply
  }
  {
    const cuda::ScopedExpertPathOptions o(cuda::ExpertPathOptions{.decode = DecodeExpertPath::tensor_cores});
    EXPECT_EQ(path(1, kl), ExpertPath::wgmma);
    EXPECT_EQ(path(1, kl, DType::f32), ExpertPath::grouped);  // the tensor cores do not apply
  }
  EXPECT_EQ(path(2 * n, kl), ExpertPath::wgmma);  // the defaults once every scope has ended
}

// A tiny non-latent MoE: E experts of [inter[e], d] / [inter[e], d] / [d, inter[e]] bf16.
struct TinyMoe {
  std::vector<Tensor> keep;
  std::vector<MlpWeights> experts;
  LatentMoeWeights w;
  TinyMoe(int64_t d, std::vector<int64_t> inter, std::mt19937_64& rng) {
    const auto add = [&](std::vector<int64_t> shape) {
      keep.push_back(gpu_random(DType::bf16, shape, rng, -0.1, 0.1));
      return Weight{keep.back(), {}};
    };
    keep.reserve(1 + 3 * inter.size());
    w.router = add({int64_t(inter.size()), d});
    for (int64_t i : inter) experts.push_back(MlpWeights{add({i, d}), add({i, d}), add({d, i})});
    w.experts = experts;
  }
};

// A latent MoE layer on the GPU: router (+ bias), optional latent projections with RMSNorm, a shared MLP, and E
// experts of [I, Dl] / [I, Dl] / [Dl, I] (bf16, or MXFP4 with random codes and scales 2^-9..2^-6) held twice:
// `stacked` (one pool per projection and part, expert e at pool + e * one expert's bytes, as place_weights builds)
// and `separate` (the same bytes, each expert at an irregular offset of another buffer: no even stride, so
// latent_moe must upload pointer tables).
struct GpuMoe {
  std::vector<Tensor> keep;
  std::vector<MlpWeights> stacked, separate;
  MlpWeights shared_w;
  LatentMoeWeights w;  // experts: stacked

  GpuMoe(int64_t d, int64_t latent, int64_t e_count, int64_t inter, bool mxfp4, std::mt19937_64& rng)
      : stacked(size_t(e_count)), separate(size_t(e_count)) {
    const auto dense = [&](int64_t out, int64_t in) {
      const double a = std::sqrt(3.0 / double(in));
      keep.push_back(gpu_random(DType::bf16, {out, in}, rng, -a, a));
      return Weight{keep.back(), {}};
    };
    w.router = dense(e_count, d);
    keep.push_back(gpu_random(DType::f32, {e_count}, rng, -0.05, 0.05));
    w.router_bias = keep.back();
    const int64_t dl = latent ? latent : d;
    if (latent) {
      w.latent_down = dense(dl, d);
      w.latent_up = dense(d, dl);
      keep.push_back(gpu_random(DType::bf16, {dl}, rng, 0.5, 1.5));
      w.latent_norm = keep.back();
    }
    shared_w = MlpWeights{dense(64, d), dense(64, d), dense(d, 64)};
    w.shared = &shared_w;
    Weight MlpWeights::*projs[3] = {&MlpWeights::gate, &MlpWeights::up, &MlpWeights::down};
    for (int p = 0; p < 3; ++p) {
      const int64_t out = p < 2 ? inter : dl, in = p < 2 ? dl : inter;
      TensorView pw, ps;
      if (mxfp4) {
        keep.push_back(gpu_random(DType::u8, {e_count, out, in / 2}, rng, 0, 255.99));
        pw = keep.back();
        keep.push_back(gpu_random(DType::u8, {e_count, out, in / 32}, rng, 118, 121.99));
        ps = keep.back();
      } else {
        const double a = std::sqrt(3.0 / double(in));
        keep.push_back(gpu_random(DType::bf16, {e_count, out, in}, rng, -a, a));
        pw = keep.back();
      }
      const std::vector<TensorView> sw = scattered(pw), ss = ps.present() ? scattered(ps) : std::vector<TensorView>{};
      for (int64_t e = 0; e < e_count; ++e) {
        stacked[size_t(e)].*projs[p] = Weight{expert(pw, e), ps.present() ? expert(ps, e) : TensorView{}};
        separate[size_t(e)].*projs[p] = Weight{sw[size_t(e)], ps.present() ? ss[size_t(e)] : TensorView{}};
      }
    }
    w.experts = stacked;
  }

  // Expert e's [out, in] slice of a [E, out, in] pool.
  static TensorView expert(const TensorView& pool, int64_t e) {
    return TensorView(static_cast<char*>(pool.data) + e * pool.stride(0) * int64_t(pool.element_size()), pool.dtype,
                      {pool.size(1), pool.size(2)}, pool.device);
  }
  // Copies of every expert's slice in one fresh buffer, expert e at byte offset sum_{e' < e} (bytes + 256 (e' % 3
  // + 1)): never evenly strided (E >= 3), and as aligned as the pool's slices when one expert's bytes are a
  // multiple of 256 (as in every shape here), so both forms take the same (vector-load) kernels.
  std::vector<TensorView> scattered(const TensorView& pool) {
    const int64_t bytes = pool.stride(0) * int64_t(pool.element_size()), gap = 256;
    int64_t total = 0;
    for (int64_t i = 0; i < pool.size(0); ++i) total += bytes + gap * (i % 3 + 1);
    keep.push_back(Tensor(DType::u8, {total}, pool.device));
    char* base = static_cast<char*>(keep.back().data());
    std::vector<TensorView> v;
    for (int64_t e = 0, off = 0; e < pool.size(0); off += bytes + gap * (e % 3 + 1), ++e) {
      v.push_back(TensorView(base + off, pool.dtype, {pool.size(1), pool.size(2)}, pool.device));
      copy(v.back(), expert(pool, e));
    }
    return v;
  }
};

struct MoeOut {
  std::vector<uint8_t> out, ids, weights;
  bool operator==(const MoeOut&) const = default;
};

struct MoeRun {
  Tensor out, ids, wts;
  MoeRun(int64_t t, int64_t d, int64_t k, DType dt)
      : out(dt, {t, d}, Device::cuda(0)), ids(DType::i32, {t, k}, Device::cuda(0)), wts(DType::f32, {t, k}, Device::cuda(0)) {}
  void operator()(const Tensor& x, const LatentMoeWeights& w, int64_t k, bool situ, const Context& ctx) const {
    GluParams act;
    act.act = situ ? GluAct::situ : GluAct::silu;
    latent_moe(x, w, RouterParams{int(k), true, 2.446f}, act, 1e-5f, out, ids, wts, 0.f, ctx);
  }
  MoeOut bytes() const { return {bytes_of(out), bytes_of(ids), bytes_of(wts)}; }
};

struct DecodeShape {
  int64_t t, e, k;
  bool mxfp4, situ, latent;
  DType dt;
};

// The decode path captured in a CUDA graph (any host synchronisation or host table would fail the capture),
// replayed on the captured input and, after the input buffer is overwritten, on a new one: both replays equal
// the eager results bit for bit (routing is recomputed on the device, nothing host-side is baked in).
TEST(CudaMoe, DecodePathCapturesInAGraphAndReplaysBitIdentically) {
  SKIP_WITHOUT_GPU();
  const int64_t d = 256;
  const std::vector<DecodeShape> shapes = {
      {1, 16, 4, true, true, true, DType::bf16},     {4, 16, 4, true, true, true, DType::f32},
      {32, 16, 4, true, true, true, DType::bf16},    {128, 32, 4, true, true, true, DType::bf16},
      {1, 16, 4, false, false, false, DType::bf16},  {4, 16, 4, false, false, false, DType::bf16},
      {32, 64, 8, false, false, false, DType::bf16}, {128, 32, 4, false, false, false, DType::f32}};
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  Context ctx;
  ctx.cuda_stream = s;
  for (const DecodeShape& c : shapes) {
    SCOPED_TRACE("T=" + std::to_string(c.t) + " E=" + std::to_string(c.e) + " K=" + std::to_string(c.k) +
                 (c.mxfp4 ? " mxfp4" : " bf16-w") + (c.situ ? " situ" : " silu") + (c.latent ? " latent" : ""));
    ASSERT_LE(c.t * c.k, 16 * c.e) << "not a decode shape";
    std::mt19937_64 rng(uint64_t(100 + c.t + c.e + c.k + (c.mxfp4 ? 1000 : 0)));
    const GpuMoe m(d, c.latent ? 128 : 0, c.e, 64, c.mxfp4, rng);
    const Tensor x1 = gpu_random(c.dt, {c.t, d}, rng, -1, 1), x2 = gpu_random(c.dt, {c.t, d}, rng, -1, 1);
    const Tensor x(c.dt, {c.t, d}, Device::cuda(0));
    const MoeRun run(c.t, d, c.k, c.dt);
    copy(x, x1);
    run(x, m.w, c.k, c.situ, ctx);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    const MoeOut want1 = run.bytes();
    copy(x, x2);
    run(x, m.w, c.k, c.situ, ctx);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    const MoeOut want2 = run.bytes();
    EXPECT_NE(want1.out, want2.out);

    copy(x, x1);
    cudaGraph_t g = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    EXPECT_NO_THROW(run(x, m.w, c.k, c.situ, ctx));
    ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
    cudaGraphExec_t ge;
    ASSERT_EQ(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(ge, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_TRUE(run.bytes() == want1) << "replay on the captured input";
    copy(x, x2);
    ASSERT_EQ(cudaGraphLaunch(ge, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_TRUE(run.bytes() == want2) << "replay on a new input";
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
  }
  cudaStreamDestroy(s);
}

// A host copy of a device view (the CPU reference's weights).
TensorView host_copy(const TensorView& v, std::vector<Tensor>& keep) {
  keep.push_back(Tensor(v.dtype, std::span<const int64_t>(v.shape.data(), size_t(v.ndim))));
  copy(keep.back().view(), v);
  return keep.back();
}
Weight host_copy(const Weight& w, std::vector<Tensor>& keep) {
  return Weight{host_copy(w.w, keep), w.scale.present() ? host_copy(w.scale, keep) : TensorView{}};
}

struct RefShape {
  int64_t t, e, k;
  bool mxfp4, situ, latent;
  DType dt;
  bool one_expert;  // K = 1 and expert 3's bias raised by 2: every token on one expert, every other expert empty
};

// Both decode paths (T * K <= 16 E; each forced with ScopedExpertPathOptions, the touched one with each register
// tile and the automatic choice, the record saying what ran) against the CPU backend on the same weights:
// routing ids equal, routing weights and outputs within the f32 (1e-5) / bf16 (5e-3) relative RMS of the
// harness; and a CUDA graph of the call replays bit-identically to the eager call. The router sees decisive
// scores: its weight reads column e of x for expert e (4 x[t, e]), the first E columns of each token hold a
// permutation of an evenly spaced grid (scores >= 1e-3 apart) and the bias is 0, so CPU and CUDA pick the same
// experts, with ragged counts (random permutations) and experts without tokens (every shape with T * K < E, and
// the one-expert shapes). The bf16-expert shapes without a latent fuse the
// shared expert (the experts' width) into the touched path's launches at T <= 8: ceil(T / MT) grid rows of it.
// On the touched path (E <= 256 here) the grouping launch routes: ids and weights equal moe_router's on the
// router GEMV's logits bit for bit. With f32 out, beta 1 (the residual add: in the combine without a latent, in the
// final convert with one) gives exactly old + the beta-0 output, element by element in f32.
TEST(CudaMoe, BothDecodePathsMatchTheCpuReferenceAndReplayBitIdentically) {
  SKIP_WITHOUT_GPU();
  const int64_t d = 256;
  const std::vector<RefShape> shapes = {
      // K3-like: latent 128 + norm, MXFP4 experts, SiTU; E = 16, K = 4 (E = 32 at T = 128: 16 rows per expert)
      {1, 16, 4, true, true, true, DType::f32, false},    {2, 16, 4, true, true, true, DType::f32, false},
      {8, 16, 4, true, true, true, DType::bf16, false},   {32, 16, 4, true, true, true, DType::f32, false},
      {128, 32, 4, true, true, true, DType::f32, false},
      // Kimi-Linear-like: no latent, bf16 experts, SiLU; E = 64, K = 8
      {1, 64, 8, false, false, false, DType::f32, false}, {2, 64, 8, false, false, false, DType::bf16, false},
      {4, 64, 8, false, false, false, DType::f32, false}, {8, 64, 8, false, false, false, DType::f32, false},
      {32, 64, 8, false, false, false, DType::f32, false}, {128, 64, 8, false, false, false, DType::bf16, false},
      // the other activation per format, and every token on one expert (MT-row groups looped 4 and 16 times)
      {8, 16, 4, true, false, true, DType::f32, false},   {8, 64, 8, false, true, false, DType::f32, false},
      {32, 16, 1, false, false, false, DType::f32, true}, {128, 16, 1, true, true, true, DType::f32, true},
      {8, 16, 1, false, false, false, DType::bf16, true}};
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  Context ctx;
  ctx.cuda_stream = s;
  for (const RefShape& c : shapes) {
    SCOPED_TRACE("T=" + std::to_string(c.t) + " E=" + std::to_string(c.e) + " K=" + std::to_string(c.k) +
                 (c.mxfp4 ? " mxfp4" : " bf16-w") + (c.situ ? " situ" : " silu") + (c.latent ? " latent" : "") +
                 (c.dt == DType::f32 ? " f32" : " bf16") + (c.one_expert ? " one-expert" : ""));
    ASSERT_LE(c.t * c.k, 16 * c.e) << "not a decode shape";
    std::mt19937_64 rng(uint64_t(300 + c.t + c.e + c.k + (c.mxfp4 ? 1000 : 0) + (c.one_expert ? 77 : 0)));
    GpuMoe m(d, c.latent ? 128 : 0, c.e, 64, c.mxfp4, rng);
    {  // decisive router: W_r[e, e] = 4, else 0; bias 0 (+2 on expert 3 for one_expert)
      Tensor r(DType::bf16, {c.e, d});
      std::memset(r.data(), 0, size_t(r.nbytes()));
      for (int64_t e = 0; e < c.e; ++e) r.data_as<uint16_t>()[e * d + e] = f32_to_bf16(4.f);
      copy(m.w.router.w, r.view());
      Tensor b(DType::f32, {c.e});
      for (int64_t e = 0; e < c.e; ++e) b.data_as<float>()[e] = c.one_expert && e == 3 ? 2.f : 0.f;
      copy(m.w.router_bias, b.view());
    }
    Tensor xh(c.dt, {c.t, d});
    std::uniform_real_distribution<double> u(-1, 1);
    for (int64_t t = 0; t < c.t; ++t) {
      std::vector<int64_t> perm(size_t(c.e));
      for (int64_t e = 0; e < c.e; ++e) perm[size_t(e)] = e;
      std::shuffle(perm.begin(), perm.end(), rng);
      for (int64_t col = 0; col < d; ++col) {  // grid values i / 64 - 0.5 are exact in bf16
        const float v = col < c.e ? float(perm[size_t(col)]) / 64.f - 0.5f : float(u(rng));
        if (c.dt == DType::f32) xh.data_as<float>()[t * d + col] = v;
        else xh.data_as<uint16_t>()[t * d + col] = f32_to_bf16(v);
      }
    }
    const Tensor x = testutil::copy_to(xh, Device::cuda(0));

    std::vector<Tensor> hk;  // the CPU reference
    std::vector<MlpWeights> he;
    for (const MlpWeights& ex : m.stacked)
      he.push_back(MlpWeights{host_copy(ex.gate, hk), host_copy(ex.up, hk), host_copy(ex.down, hk)});
    MlpWeights hs{host_copy(m.shared_w.gate, hk), host_copy(m.shared_w.up, hk), host_copy(m.shared_w.down, hk)};
    LatentMoeWeights hw;
    hw.router = host_copy(m.w.router, hk);
    hw.router_bias = host_copy(m.w.router_bias, hk);
    if (c.latent) {
      hw.latent_down = host_copy(m.w.latent_down, hk);
      hw.latent_up = host_copy(m.w.latent_up, hk);
      hw.latent_norm = host_copy(m.w.latent_norm, hk);
    }
    hw.shared = &hs;
    hw.experts = he;
    Tensor ho(c.dt, {c.t, d}), hi(DType::i32, {c.t, c.k}), hwt(DType::f32, {c.t, c.k});
    GluParams act;
    act.act = c.situ ? GluAct::situ : GluAct::silu;
    latent_moe(xh, hw, RouterParams{int(c.k), true, 2.446f}, act, 1e-5f, ho, hi, hwt);

    using cuda::DecodeExpertPath;
    using cuda::TouchedTile;
    const std::vector<std::pair<DecodeExpertPath, TouchedTile>> runs = {
        {DecodeExpertPath::touched, TouchedTile::in_flight},
        {DecodeExpertPath::touched, TouchedTile::streaming},
        {DecodeExpertPath::touched, TouchedTile::automatic},  // in flight at T = 1, streaming above
        {DecodeExpertPath::grouped, TouchedTile::automatic}};
    for (const auto& [p, tile] : runs) {
      const bool touched = p == DecodeExpertPath::touched;
      const bool streaming = tile == TouchedTile::streaming || (tile == TouchedTile::automatic && c.t > 1);
      SCOPED_TRACE(!touched     ? "grouped path"
                   : streaming ? "touched path, streaming tile"
                               : "touched path, in-flight tile");
      cuda::ExpertPathRecord rec;
      const cuda::ScopedExpertPathOptions scope(
          cuda::ExpertPathOptions{.decode = p, .touched_tile = tile, .record = &rec});
      const MoeRun run(c.t, d, c.k, c.dt);
      run(x, m.w, c.k, c.situ, ctx);
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      EXPECT_EQ(rec.touched, touched ? 1 : 0);
      EXPECT_EQ(rec.grouped, touched ? 0 : 1);
      EXPECT_EQ(rec.touched_streaming, touched && streaming ? 1 : 0);
      EXPECT_EQ(rec.touched_in_flight, touched && !streaming ? 1 : 0);
      const MoeOut eager = run.bytes();
      EXPECT_EQ(bytes_of(hi), eager.ids) << "routing ids";
      if (touched) {  // routed inside the grouping launch (E <= 256): bit-identical to the router launch
        const Tensor lg(DType::f32, {c.t, c.e}, Device::cuda(0)), ids2(DType::i32, {c.t, c.k}, Device::cuda(0)),
            w2(DType::f32, {c.t, c.k}, Device::cuda(0));
        linear(x, m.w.router, lg, 0.f, ctx);
        moe_router(lg, m.w.router_bias, RouterParams{int(c.k), true, 2.446f}, ids2, w2, ctx);
        ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
        EXPECT_EQ(bytes_of(ids2), eager.ids) << "ids against moe_router";
        EXPECT_EQ(bytes_of(w2), eager.weights) << "weights against moe_router";
      }
      if (c.one_expert) {
        std::vector<int32_t> ids(size_t(c.t));
        std::memcpy(ids.data(), eager.ids.data(), ids.size() * 4);
        EXPECT_EQ(ids, std::vector<int32_t>(size_t(c.t), 3));
      }
      const auto rel_rms = [](const std::vector<double>& a, const std::vector<double>& b) {
        double num = 0, den = 0;
        for (size_t i = 0; i < a.size(); ++i) num += (a[i] - b[i]) * (a[i] - b[i]), den += b[i] * b[i];
        return std::sqrt(num / std::max(den, 1e-300));
      };
      EXPECT_LE(rel_rms(testutil::host_values(run.wts), testutil::host_values(hwt)), 1e-5) << "routing weights";
      const std::vector<double> got = testutil::host_values(run.out), want = testutil::host_values(ho);
      for (const double v : got) ASSERT_TRUE(std::isfinite(v));
      EXPECT_LE(rel_rms(got, want), c.dt == DType::f32 ? 1e-5 : 5e-3) << "output";

      cudaGraph_t g = nullptr;
      ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
      EXPECT_NO_THROW(run(x, m.w, c.k, c.situ, ctx));
      ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
      EXPECT_EQ(touched ? rec.touched : rec.grouped, 2) << "the captured call took the forced path";
      cudaGraphExec_t ge;
      ASSERT_EQ(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
      for (int r = 0; r < 2; ++r) {
        ASSERT_EQ(cudaGraphLaunch(ge, s), cudaSuccess);
        ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
        EXPECT_TRUE(run.bytes() == eager) << "replay " << r;
      }
      cudaGraphExecDestroy(ge);
      cudaGraphDestroy(g);
      if (c.dt == DType::f32) {  // beta 1 (the residual add in the final write): bit for bit old + the beta-0 out
        const Tensor acc = gpu_random(DType::f32, {c.t, d}, rng, -2, 2);
        const std::vector<double> old = testutil::host_values(acc);
        latent_moe(x, m.w, RouterParams{int(c.k), true, 2.446f}, act, 1e-5f, acc, {}, {}, 1.f, ctx);
        ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
        const std::vector<double> sum = testutil::host_values(acc);
        size_t bad = 0;
        for (size_t i = 0; i < sum.size(); ++i) bad += float(sum[i]) != float(old[i]) + float(got[i]);
        EXPECT_EQ(bad, 0u) << "beta 1: elements that differ from old + out";
      }
    }
  }
  cudaStreamDestroy(s);
}

// The touched path's routing (inside its grouping launch at E <= 256, K <= 32: router_rank.cuh; above that
// moe_router and the grouping launch's copies) against moe_router on the same logits, ids and weights bit for bit:
// T = 1 .. 17 (one to three passes of the rank routine), E = 32 .. 256 and 896 (K3: the router launch), K = 1 .. 32,
// with and without bias, renormalize on and off, heavy ties and NaN logits. The router reads column e % d of x
// for expert e (W_r one-hot: exact f32 logits), so experts d apart tie before the bias (lower index first);
// x holds multiples of 1/8 in [-2, 2] (more ties); a NaN in a token's row makes all its logits NaN (0 * NaN).
TEST(CudaMoe, RoutingInTheGroupingLaunchEqualsTheRouterBitForBit) {
  SKIP_WITHOUT_GPU();
  struct Shape {
    int64_t t, e, k;
    bool bias, renorm, nan;
  };
  const std::vector<Shape> shapes = {
      {1, 256, 8, true, true, false},    {2, 256, 8, true, true, true},    {3, 256, 8, false, true, false},
      {4, 256, 8, true, false, false},   {5, 256, 16, true, true, false},  {8, 256, 8, true, true, false},
      {8, 256, 16, false, false, true},  {9, 256, 32, true, true, false},  {17, 40, 8, true, true, true},
      {6, 32, 1, false, true, false},    {7, 100, 5, true, false, false},  {3, 896, 16, true, true, false},
      {1, 896, 16, false, true, true}};
  const int64_t d = 128;
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  Context ctx;
  ctx.cuda_stream = s;
  for (const Shape& c : shapes) {
    SCOPED_TRACE("T=" + std::to_string(c.t) + " E=" + std::to_string(c.e) + " K=" + std::to_string(c.k) +
                 (c.bias ? " bias" : "") + (c.renorm ? " renorm" : "") + (c.nan ? " nan" : ""));
    std::mt19937_64 rng(uint64_t(900 + c.t * 7 + c.e + c.k));
    GpuMoe m(d, 0, c.e, 32, false, rng);
    Tensor r(DType::bf16, {c.e, d});
    std::memset(r.data(), 0, size_t(r.nbytes()));
    for (int64_t e = 0; e < c.e; ++e) r.data_as<uint16_t>()[e * d + e % d] = f32_to_bf16(1.f);
    copy(m.w.router.w, r.view());
    std::uniform_int_distribution<int> grid(-16, 16);
    if (c.bias) {
      Tensor b(DType::f32, {c.e});
      for (int64_t e = 0; e < c.e; ++e) b.data_as<float>()[e] = float(grid(rng)) / 64.f;
      copy(m.w.router_bias, b.view());
    } else {
      m.w.router_bias = TensorView{};
    }
    Tensor xh(DType::f32, {c.t, d});
    for (int64_t i = 0; i < xh.numel(); ++i) xh.data_as<float>()[i] = float(grid(rng)) / 8.f;
    if (c.nan) xh.data_as<float>()[(c.t / 2) * d] = std::nanf("");
    const Tensor x = testutil::copy_to(xh, Device::cuda(0));
    const RouterParams rp{int(c.k), c.renorm, 2.446f};

    cuda::ExpertPathRecord rec;
    const cuda::ScopedExpertPathOptions scope(
        cuda::ExpertPathOptions{.decode = cuda::DecodeExpertPath::touched, .record = &rec});
    const Tensor out(DType::f32, {c.t, d}, Device::cuda(0)), ids(DType::i32, {c.t, c.k}, Device::cuda(0)),
        wts(DType::f32, {c.t, c.k}, Device::cuda(0));
    latent_moe(x, m.w, rp, GluParams{}, 1e-5f, out, ids, wts, 0.f, ctx);
    const Tensor lg(DType::f32, {c.t, c.e}, Device::cuda(0)), ids2(DType::i32, {c.t, c.k}, Device::cuda(0)),
        w2(DType::f32, {c.t, c.k}, Device::cuda(0));
    linear(x, m.w.router, lg, 0.f, ctx);
    moe_router(lg, m.w.router_bias, rp, ids2, w2, ctx);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(rec.touched, 1) << "the touched path ran";
    EXPECT_EQ(bytes_of(ids), bytes_of(ids2)) << "ids against moe_router";
    EXPECT_EQ(bytes_of(wts), bytes_of(w2)) << "weights against moe_router";
    if (!c.bias) {  // no bias: every CPU key is the CUDA key's logit order (ties by index), so the ids agree
      Tensor lh(DType::f32, {c.t, c.e}), ih(DType::i32, {c.t, c.k}), wh(DType::f32, {c.t, c.k});
      copy(lh, lg);
      moe_router(lh, TensorView{}, rp, ih, wh);
      EXPECT_EQ(bytes_of(ids), std::vector<uint8_t>(static_cast<uint8_t*>(ih.data()),
                                                    static_cast<uint8_t*>(ih.data()) + ih.nbytes()))
          << "ids against the CPU router";
    }
  }
  cudaStreamDestroy(s);
}

// The touched path's in-flight tile at T = 1 streams several column tiles per block (touched.cuh: the next tile's
// first weight round before the current tile's reduction; ExpertPathOptions::touched_tiles_per_block, 0 = one
// wave of blocks): 1, 2, 5 and 64 tiles per block and the automatic choice give identical bytes (ks 1 and 4: d 256
// and 2304; uneven last blocks; more tiles per block than tiles), with the shared expert fused; at T = 2 (MT 2) the
// option does not apply and the bytes match too.
TEST(CudaMoe, TouchedTilesPerBlockLeaveTheBytesUnchanged) {
  SKIP_WITHOUT_GPU();
  for (const int64_t d : {256, 2304})
    for (const int64_t t : {1, 2}) {
      SCOPED_TRACE("d=" + std::to_string(d) + " T=" + std::to_string(t));
      std::mt19937_64 rng(uint64_t(500 + d + t));
      GpuMoe m(d, 0, 64, 64, false, rng);
      m.shared_w = MlpWeights{m.stacked[5].gate, m.stacked[5].up, m.stacked[5].down};  // fused: experts' shapes
      const Tensor x = gpu_random(DType::bf16, {t, d}, rng, -1, 1);
      const MoeRun run(t, d, 8, DType::f32);
      std::vector<MoeOut> outs;
      for (const int per_block : {1, 2, 5, 64, 0}) {
        cuda::ExpertPathRecord rec;
        const cuda::ScopedExpertPathOptions scope(cuda::ExpertPathOptions{.decode = cuda::DecodeExpertPath::touched,
                                                                          .touched_tile = cuda::TouchedTile::in_flight,
                                                                          .touched_tiles_per_block = per_block,
                                                                          .record = &rec});
        run(x, m.w, 8, false, {});
        EXPECT_EQ(rec.touched_in_flight, 1) << per_block << " tiles per block";
        outs.push_back(run.bytes());
        EXPECT_TRUE(outs.back() == outs.front()) << per_block << " tiles per block";
      }
      for (const double v : testutil::host_values(run.out)) ASSERT_TRUE(std::isfinite(v));
    }
}

// Stacked experts (base + e * stride) and separately allocated ones (per-call pointer tables on both decode
// paths, per-expert views on the prefill path) read the same bytes: identical results.
TEST(CudaMoe, StackedAndSeparateExpertsGiveIdenticalBytes) {
  SKIP_WITHOUT_GPU();
  const int64_t d = 256;
  using cuda::DecodeExpertPath;
  for (const bool mxfp4 : {false, true})
    for (const int64_t t : {8, 256})  // E = 8, K = 4: 4 (decode) and 128 (prefill) rows per expert on average
      for (const DecodeExpertPath p : {DecodeExpertPath::touched, DecodeExpertPath::grouped}) {
        if (t == 256 && p == DecodeExpertPath::grouped) continue;  // prefill: the decode choice does not apply
        SCOPED_TRACE(std::string(mxfp4 ? "mxfp4" : "bf16-w") + " T=" + std::to_string(t) +
                     (p == DecodeExpertPath::touched ? " touched" : " grouped"));
        const cuda::ScopedExpertPathOptions scope(cuda::ExpertPathOptions{.decode = p});
        std::mt19937_64 rng(uint64_t(200 + t + (mxfp4 ? 1 : 0)));
        GpuMoe m(d, mxfp4 ? 128 : 0, 8, 64, mxfp4, rng);
        const Tensor x = gpu_random(DType::bf16, {t, d}, rng, -1, 1);
        const MoeRun run(t, d, 4, DType::bf16);
        run(x, m.w, 4, mxfp4, {});
        const MoeOut a = run.bytes();
        LatentMoeWeights sep = m.w;
        sep.experts = m.separate;
        run(x, sep, 4, mxfp4, {});
        EXPECT_TRUE(run.bytes() == a);
      }
}

TEST(CudaMoe, GraphCaptureIsRefusedForSeparateExpertsAndThePrefillPathLeavingItValid) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(5);
  GpuMoe m(64, 0, 8, 32, false, rng);
  LatentMoeWeights sep = m.w;
  sep.experts = m.separate;
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  Context ctx;
  ctx.cuda_stream = s;
  const auto refused = [&](const LatentMoeWeights& w, int64_t t, DType dt, const char* want1, const char* want2) {
    const Tensor x = gpu_random(dt, {t, 64}, rng, -1, 1);
    const MoeRun run(t, 64, 4, dt);
    ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    EXPECT_KIMI_ERROR(run(x, w, 4, false, ctx), "latent_moe", "graph capture", want1, want2);
    cudaGraph_t g = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);  // the capture is still valid
    if (g) cudaGraphDestroy(g);
    run(x, w, 4, false, ctx);  // and the call runs outside capture
    EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  };
  refused(sep, 4, DType::bf16, "'w.experts'", "separate allocations");
  // 40 tokens x top-4 over 8 experts: 20 rows per expert on average > 16, f32 x: the cuBLAS path
  refused(m.w, 40, DType::f32, "T * top_k = 160", "T * top_k <= 128");
  // the tensor-core prefill path captures with stacked experts only
  refused(sep, 40, DType::bf16, "'w.experts'", "separate allocations");
  cudaStreamDestroy(s);
}

TEST(CudaMoe, LatentMoeNeedsOneWeightFormatPerProjection) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(8);
  GpuMoe dense(64, 0, 2, 32, false, rng), mx(64, 0, 2, 32, true, rng);
  std::vector<MlpWeights> mixed = dense.stacked;
  mixed[1].up = mx.stacked[1].up;
  LatentMoeWeights w = dense.w;
  w.experts = mixed;
  const Tensor x = gpu_random(DType::f32, {2, 64}, rng, -1, 1);
  const Tensor out(DType::f32, {2, 64}, Device::cuda(0));
  EXPECT_KIMI_ERROR(latent_moe(x, w, RouterParams{1, true, 1.f}, GluParams{}, 1e-5f, out), "latent_moe",
                    "'w.experts[1].up'", "expected the weight format of expert 0 on CUDA (bf16)", "got mxfp4");
}

TEST(CudaMoe, LatentMoeNeedsOneExpertWidth) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(6);
  TinyMoe m(32, {16, 24}, rng);
  const Tensor x = gpu_random(DType::f32, {2, 32}, rng, -1, 1);
  const Tensor out(DType::f32, {2, 32}, Device::cuda(0));
  EXPECT_KIMI_ERROR(latent_moe(x, m.w, RouterParams{1, true, 1.f}, GluParams{}, 1e-5f, out), "latent_moe",
                    "'w.experts[1]'", "16", "24");
}

TEST(CudaMoe, QuantileBalanceIsCpuOnly) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(7);
  const Tensor sc = gpu_random(DType::f32, {8, 4}, rng, 0, 1), b = gpu_random(DType::f32, {4}, rng, -0.1, 0.1);
  EXPECT_KIMI_ERROR(moe_quantile_balance(sc, b, 1), "moe_quantile_balance", "not implemented", "cuda:0");
}

}  // namespace
}  // namespace kimi
#endif  // KIMI_WITH_CUDA
