// CUDA-only properties of linear and the MoE family that the harness cannot express (values against the
// fp64 oracle run in the harness on every device): the decode projection records into a CUDA graph and
// replays bit-identically; latent_moe's decode path (T * top_k <= 16 E, stacked experts) records into a CUDA
// graph (so it never waits on the host) and replays bit-identically, also on new inputs; stacked and separately
// allocated experts give identical bytes; graph capture is refused (leaving it valid) for separate experts and
// for the cuBLAS prefill path (f32 x; bf16 x with bf16 experts takes the capturable tensor-core path,
// tests/test_cuda_moe_grouped.cpp); experts of different widths or formats are refused; moe_quantile_balance is CPU-only.
// Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "expect_error.h"
#include "kimi/device.h"
#include "kimi/ops/linear.h"
#include "kimi/ops/moe.h"

#ifdef KIMI_WITH_CUDA
#include <cuda_runtime.h>

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
    latent_moe(x, w, RouterParams{int(k), true, 2.446f}, act, 1e-5f, out, ids, wts, ctx);
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

// Stacked experts (base + e * stride) and separately allocated ones (per-call pointer tables on the decode
// path, per-expert views on the prefill path) read the same bytes: identical results on both paths.
TEST(CudaMoe, StackedAndSeparateExpertsGiveIdenticalBytes) {
  SKIP_WITHOUT_GPU();
  const int64_t d = 256;
  for (const bool mxfp4 : {false, true})
    for (const int64_t t : {8, 256}) {  // E = 8, K = 4: 4 (decode) and 128 (prefill) rows per expert on average
      SCOPED_TRACE(std::string(mxfp4 ? "mxfp4" : "bf16-w") + " T=" + std::to_string(t));
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
