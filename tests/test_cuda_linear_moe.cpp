// CUDA-only properties of linear and the MoE family that the harness cannot express (values against the
// fp64 oracle run in the harness on every device): the decode projection records into a CUDA graph and
// replays bit-identically; latent_moe refuses graph capture (its counts copy) and experts of different
// widths; moe_quantile_balance is CPU-only. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
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

TEST(CudaMoe, LatentMoeRefusesGraphCaptureLeavingItValid) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(5);
  TinyMoe m(32, {16, 16, 16}, rng);
  const Tensor x = gpu_random(DType::bf16, {4, 32}, rng, -1, 1);
  const Tensor out(DType::bf16, {4, 32}, Device::cuda(0));
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  Context ctx;
  ctx.cuda_stream = s;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  EXPECT_KIMI_ERROR(latent_moe(x, m.w, RouterParams{2, true, 1.f}, GluParams{}, 1e-5f, out, {}, {}, ctx), "latent_moe",
                    "graph capture");
  cudaGraph_t g = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);  // the capture is still valid
  if (g) cudaGraphDestroy(g);
  latent_moe(x, m.w, RouterParams{2, true, 1.f}, GluParams{}, 1e-5f, out, {}, {}, ctx);  // runs outside capture
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaStreamDestroy(s);
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
