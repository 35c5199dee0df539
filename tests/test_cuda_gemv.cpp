// The CUDA decode projections (src/cuda/linear/gemv.cuh and the tensor-core gemv_mma.cuh, M <= 16) against the CPU
// backend on the shapes that pick their variants: every M bucket (1, 2, 4, 8, 16 accumulators per row; one or two
// 8-token MMA blocks), row counts that leave a partial row group (NR = 2 or 4 rows per warp group, 16-row MMA
// tiles), K split over 1 to 8 warps (small n, long K), K tails past the last whole chunk or 32-column MMA step,
// f32 and bf16 x read as they are, bf16 x with unaligned rows (the converted copy, or cuBLAS at M > 4) or K % 8 != 0
// (not the tensor-core kernel), padded aligned rows read in place, bf16 and MXFP4 weights, beta 0 and 1. The CPU backend computes in fp32 with another summation order: relative error <= 1e-5 per element
// (scaled by the row's sum of |x w|). Compiled in CUDA builds only (tests/cuda_tests.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kimi/device.h"
#include "kimi/ops/linear.h"
#include "kimi/ops/mxfp4.h"
#include "tensor_testutil.h"

#ifdef KIMI_WITH_CUDA
namespace kimi {
namespace {

using testutil::copy_to;
using testutil::host_values;

Tensor uniform(DType dt, std::vector<int64_t> shape, std::mt19937_64& rng, double lo, double hi) {
  Tensor t(dt, std::span<const int64_t>(shape));
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dt == DType::u8) t.data_as<uint8_t>()[i] = uint8_t(u(rng));
    else store_from_f32(t.data(), dt, i, float(u(rng)));
  }
  return t;
}

struct GemvCase {
  int64_t m, n, k;
  bool mxfp4;
  DType x;
  int64_t x_pad;  // extra elements per x row (0: contiguous)
  float beta;
};

std::string name(const GemvCase& c) {
  return "M=" + std::to_string(c.m) + " N=" + std::to_string(c.n) + " K=" + std::to_string(c.k) +
         (c.mxfp4 ? " mxfp4" : " bf16") + (c.x == DType::f32 ? " x f32" : " x bf16") +
         (c.x_pad ? " padded rows" : "") + " beta " + std::to_string(int(c.beta));
}

TEST(CudaGemv, MatchesTheCpuOnEveryVariant) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (these run on the GPU machine)";
  std::vector<GemvCase> cases;
  for (const int64_t m : {1, 2, 3, 8, 16})
    for (const auto& [n, k] : std::vector<std::pair<int64_t, int64_t>>{{1, 64}, {5, 2304}, {1024, 2304}, {37, 7168},
                                                                        {2051, 4096 + 24}})
      for (const bool mx : {false, true})
        for (const DType x : {DType::f32, DType::bf16}) cases.push_back({m, n, k, mx, x, 0, m == 3 ? 1.f : 0.f});
  cases.push_back({4, 300, 2304, false, DType::bf16, 3, 0.f});  // unaligned bf16 rows: the converted f32 copy
  cases.push_back({1, 300, 2304, true, DType::bf16, 8, 1.f});   // padded, aligned rows read in place
  // bf16 x, bf16 W: the tensor-core GEMV (M <= 8: one token block, M > 8: two), its row-tile tails (n % 16), K
  // tails inside a 32-column step (K % 32 = 8, 24; K = 40 < two steps), split K over 1 to 8 warps, padded rows.
  for (const int64_t m : {1, 2, 4, 5, 7, 9, 12, 16})
    for (const auto& [n, k] : std::vector<std::pair<int64_t, int64_t>>{{1, 40}, {17, 264}, {16, 7168}, {130, 520}})
      cases.push_back({m, n, k, false, DType::bf16, 0, m % 2 ? 1.f : 0.f});
  cases.push_back({9, 300, 2304, false, DType::bf16, 8, 1.f});   // padded, aligned rows read in place
  cases.push_back({8, 300, 2304, false, DType::bf16, 3, 0.f});   // unaligned rows: cuBLAS
  cases.push_back({16, 45, 100, false, DType::bf16, 0, 1.f});    // K % 8 != 0: cuBLAS
  cases.push_back({3, 45, 100, false, DType::bf16, 0, 0.f});     // K % 8 != 0: the FFMA GEMV
  std::mt19937_64 rng(2026);
  const Device gpu = Device::cuda(0);
  for (const GemvCase& c : cases) {
    if (c.mxfp4 && c.k % 32 != 0) continue;
    const Tensor xs = uniform(c.x, {c.m, c.k + c.x_pad}, rng, -1, 1);
    const TensorView xv = xs.view().slice(1, 0, c.k);
    Weight w;
    Tensor wt, sc;
    if (c.mxfp4) {
      wt = uniform(DType::u8, {c.n, c.k / 2}, rng, 0, 255.99), sc = uniform(DType::u8, {c.n, c.k / 32}, rng, 118, 124.99);
      w = Weight{wt, sc};
    } else {
      wt = uniform(DType::bf16, {c.n, c.k}, rng, -0.05, 0.05);
      w = Weight{wt, {}};
    }
    const Tensor y0 = uniform(DType::f32, {c.m, c.n}, rng, -1, 1);
    Tensor y_cpu = copy_to(y0, Device::cpu());
    linear(xv, w, y_cpu, c.beta);

    const Tensor xg = copy_to(xs, gpu), wg = copy_to(wt, gpu), scg = c.mxfp4 ? copy_to(sc, gpu) : Tensor();
    const Weight wgpu{wg, c.mxfp4 ? scg.view() : TensorView{}};
    Tensor y_gpu = copy_to(y0, gpu);
    linear(xg.view().slice(1, 0, c.k), wgpu, y_gpu, c.beta);

    // the error scale of each output: sum_k |x w| (from the CPU's own |x| |w| products on the host)
    const std::vector<double> got = host_values(y_gpu), want = host_values(y_cpu), x = host_values(xs);
    Tensor wf(DType::f32, {c.n, c.k});
    if (c.mxfp4) mxfp4_dequant(wt, sc, wf);
    const std::vector<double> wv = c.mxfp4 ? host_values(wf) : host_values(wt), old = host_values(y0);
    size_t bad = 0;
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t r = 0; r < c.n; ++r) {
        double scale = c.beta != 0.f ? std::fabs(old[size_t(i * c.n + r)]) : 0.0;
        for (int64_t kk = 0; kk < c.k; ++kk)
          scale += std::fabs(x[size_t(i * (c.k + c.x_pad) + kk)] * wv[size_t(r * c.k + kk)]);
        const size_t e = size_t(i * c.n + r);
        if (!(std::fabs(got[e] - want[e]) <= 1e-5 * scale + 1e-30)) {
          if (bad++ < 3)
            ADD_FAILURE() << name(c) << ": y[" << i << ", " << r << "] = " << got[e] << ", CPU " << want[e]
                          << " (scale " << scale << ")";
        }
      }
    EXPECT_EQ(bad, 0u) << name(c);
  }
}

}  // namespace
}  // namespace kimi
#endif  // KIMI_WITH_CUDA
