// latent_moe's tensor-core path on CUDA (bf16 x, dense bf16 or MXFP4 experts, any T) through the public operator,
// with each of its two grouped GEMM kernels (src/cuda/moe/grouped_gemm.cuh, cp.async, every layout and format;
// grouped_gemm_ws.cuh, warp-specialized and persistent, stacked dense bf16 experts only), against the CPU operator
// on the same bytes:
//   - relative RMS error of out <= 5e-3 (bf16 operands; the CPU computes in f32 with f32 activations) at small
//     widths and at the Kimi-Linear (d 2304, I 1024) and K3 latent (d 7168, latent 3584, I 3072) widths, SiLU and
//     SiTU, with and without the latent projections; ragged expert counts (a quarter of the experts get no token,
//     expert 0 gets every token: several M-tiles, the last one partial), all tokens on one expert (K = 1), T and I
//     not multiples of the tiles; separately allocated experts; many tiles per CTA of the persistent kernel; the
//     routing (ids) equals the CPU's exactly; the two kernels' outputs are bit-identical where both apply, the
//     automatic choice is the warp-specialized kernel exactly where it applies, and forcing it elsewhere throws;
//     the shared MLP through the fused GLU (glu_wgmma) where forced;
//   - experts_wgmma itself on hand-made expert row counts, each kernel against an fp64 reference and the two
//     bit-identical, with ye f32 and bf16 (bf16 ye exactly the rounding of the f32 ye);
//   - cuda::mlp's fused GLU (glu_wgmma) against an fp64 reference, both kernels, and its automatic rule;
//   - the path recorded into a CUDA graph on a non-default stream (any host synchronisation or host table would
//     fail the capture) replays bit-identically to eager runs, on the captured input and on a new one.
// Routing is made exact in any precision: the router is the identity on x's first E columns (W_r[e, e] = 1, else
// 0, no bias), and those columns hold codes on a 1/8 grid: 4 - j / 8 for the j-th chosen expert of a token, at most
// 1 for the others (an exact logit gap >= 1.125, so CPU and GPU pick the same experts).
// Every call forces the tensor-core path at decode row counts (src/cuda/moe/options.h: the automatic rule takes
// the touched path at small T) and checks in the record that it ran. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kimi/device.h"
#include "kimi/dtype.h"
#include "kimi/error.h"
#include "kimi/ops/moe.h"

#ifdef KIMI_WITH_CUDA
#include <cuda_runtime.h>

#include "cuda/moe/experts.h"
#include "cuda/moe/options.h"

namespace kimi {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device"

constexpr double kBar = 5e-3;  // bf16 relative RMS error (SPEC 14)

Tensor host_bf16(std::vector<int64_t> shape, std::mt19937_64& rng, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  Tensor t(DType::bf16, std::span<const int64_t>(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<uint16_t>()[i] = f32_to_bf16(float(u(rng)));
  return t;
}

Tensor to_device(const Tensor& h, Device dev) {
  Tensor d(h.view().dtype, std::span<const int64_t>(h.view().shape.data(), size_t(h.view().ndim)), dev);
  copy(d, h);
  return d;
}

std::vector<float> to_host_f32(const Tensor& d) {
  Tensor h(DType::f32, std::span<const int64_t>(d.view().shape.data(), size_t(d.view().ndim)));
  copy(h, d);
  return std::vector<float>(h.data_as<float>(), h.data_as<float>() + h.numel());
}

std::vector<uint8_t> bytes_of(const Tensor& d) {
  Tensor h(d.view().dtype, std::span<const int64_t>(d.view().shape.data(), size_t(d.view().ndim)));
  copy(h, d);
  return std::vector<uint8_t>(static_cast<uint8_t*>(h.data()), static_cast<uint8_t*>(h.data()) + h.nbytes());
}

// A bf16 device tensor's values as f32 (copy() keeps the dtype).
std::vector<float> bf16_to_host_f32(const Tensor& d) {
  const std::vector<uint8_t> b = bytes_of(d);
  std::vector<float> v(b.size() / 2);
  for (size_t i = 0; i < v.size(); ++i) {
    uint16_t u;
    std::memcpy(&u, b.data() + 2 * i, 2);
    v[i] = bf16_to_f32(u);
  }
  return v;
}

double rel_rms(const std::vector<float>& got, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = double(got[i]) - double(ref[i]);
    num += e * e;
    den += double(ref[i]) * double(ref[i]);
  }
  return std::sqrt(num / den);
}

struct Shape {
  int64_t d, latent, e, k, inter, t;
  bool situ;
  bool one_expert;      // every token on expert 3 (K = 1); else ragged (below)
  bool mxfp4 = false;   // routed experts in MXFP4 (random codes, scales 2^-9 .. 2^-5) instead of bf16
  bool separate = false;  // every expert projection in its own allocation (not stacked: per-call pointer tables)
  int64_t shared_inter = 64;  // the shared MLP's width
  bool fused_glu = false;     // the shared MLP's GLU forced through glu_wgmma (options.h MlpGluPath::fused)
};

std::string name_of(const Shape& c) {
  return "d=" + std::to_string(c.d) + " latent=" + std::to_string(c.latent) + " E=" + std::to_string(c.e) +
         " K=" + std::to_string(c.k) + " I=" + std::to_string(c.inter) + " T=" + std::to_string(c.t) +
         (c.situ ? " situ" : " silu") + (c.one_expert ? " one-expert" : " ragged") + (c.mxfp4 ? " mxfp4" : " bf16-w") +
         (c.separate ? " separate" : "") + " shared I=" + std::to_string(c.shared_inter) +
         (c.fused_glu ? " fused-glu" : "");
}

// The layer's weights on the host (bf16): the identity router, optional latent projections and norm, a shared
// MLP of width 64 and E experts stacked per projection ([E, out, in] pools, as place_weights lays them out).
struct HostLayer {
  Tensor router, latent_down, latent_up, latent_norm, shared[3], pools[3], scales[3];  // scales: MXFP4 only
  HostLayer(const Shape& c, std::mt19937_64& rng) {
    router = Tensor(DType::bf16, {c.e, c.d});
    for (int64_t i = 0; i < router.numel(); ++i) router.data_as<uint16_t>()[i] = 0;
    for (int64_t e = 0; e < c.e; ++e) router.data_as<uint16_t>()[e * c.d + e] = f32_to_bf16(1.f);
    const int64_t dl = c.latent ? c.latent : c.d;
    const auto dense = [&](int64_t out, int64_t in) {
      const double a = std::sqrt(3.0 / double(in));
      return host_bf16({out, in}, rng, -a, a);
    };
    if (c.latent) {
      latent_down = dense(dl, c.d);
      latent_up = dense(c.d, dl);
      latent_norm = host_bf16({dl}, rng, 0.5, 1.5);
    }
    shared[0] = dense(c.shared_inter, c.d);
    shared[1] = dense(c.shared_inter, c.d);
    shared[2] = dense(c.d, c.shared_inter);
    for (int p = 0; p < 3; ++p) {
      const int64_t out = p < 2 ? c.inter : dl, in = p < 2 ? dl : c.inter;
      if (c.mxfp4) {
        pools[p] = Tensor(DType::u8, {c.e, out, in / 2});
        scales[p] = Tensor(DType::u8, {c.e, out, in / 32});
        std::uniform_int_distribution<int> byte(0, 255), expo(118, 122);
        for (int64_t i = 0; i < pools[p].numel(); ++i) pools[p].data_as<uint8_t>()[i] = uint8_t(byte(rng));
        for (int64_t i = 0; i < scales[p].numel(); ++i) scales[p].data_as<uint8_t>()[i] = uint8_t(expo(rng));
        continue;
      }
      const double a = std::sqrt(3.0 / double(in));
      pools[p] = host_bf16({c.e, out, in}, rng, -a, a);
    }
  }
};

// The layer on one device.
struct Layer {
  std::vector<Tensor> keep;
  std::vector<MlpWeights> experts;
  MlpWeights shared_w;
  LatentMoeWeights w;
  Layer(const HostLayer& h, const Shape& c, Device dev) {
    keep.reserve(16);
    const auto put = [&](const Tensor& t) {
      keep.push_back(to_device(t, dev));
      return TensorView(keep.back());
    };
    w.router = Weight{put(h.router), {}};
    if (c.latent) {
      w.latent_down = Weight{put(h.latent_down), {}};
      w.latent_up = Weight{put(h.latent_up), {}};
      w.latent_norm = put(h.latent_norm);
    }
    shared_w = MlpWeights{Weight{put(h.shared[0]), {}}, Weight{put(h.shared[1]), {}}, Weight{put(h.shared[2]), {}}};
    w.shared = &shared_w;
    TensorView pools[3], scales[3];
    for (int p = 0; p < 3; ++p) {
      pools[p] = put(h.pools[p]);
      if (c.mxfp4) scales[p] = put(h.scales[p]);
    }
    const auto slice = [](const TensorView& pool, int64_t e) {
      if (!pool.present()) return TensorView{};
      return TensorView(static_cast<char*>(pool.data) + e * pool.stride(0) * int64_t(pool.element_size()),
                        pool.dtype, {pool.size(1), pool.size(2)}, pool.device);
    };
    // Separate: expert e's slice of each pool copied into an allocation of its own (the same values), expert 1's
    // allocated before expert 0's, so that the experts cannot be evenly strided (expert_layout: not stacked).
    const auto own = [&](const TensorView& v) {
      if (!c.separate || !v.present()) return v;
      keep.emplace_back(v.dtype, std::span<const int64_t>(v.shape.data(), size_t(v.ndim)), dev);
      copy(keep.back(), v);
      return TensorView(keep.back());
    };
    keep.reserve(keep.size() + size_t(c.separate ? 6 * c.e : 0));
    experts.resize(size_t(c.e));
    for (int64_t i = 0; i < c.e; ++i) {
      const int64_t e = i < 2 && c.e > 1 ? 1 - i : i;
      experts[size_t(e)] = MlpWeights{Weight{own(slice(pools[0], e)), own(slice(scales[0], e))},
                                      Weight{own(slice(pools[1], e)), own(slice(scales[1], e))},
                                      Weight{own(slice(pools[2], e)), own(slice(scales[2], e))}};
    }
    w.experts = experts;
  }
};

// x [T, d] bf16: routing codes in the first E columns (see the file comment), uniform [-1, 1) elsewhere. Ragged:
// every token takes expert 0, then K - 1 distinct experts among 1 .. 3E/4 - 1 (the last quarter gets nothing).
Tensor host_x(const Shape& c, std::mt19937_64& rng) {
  Tensor x = host_bf16({c.t, c.d}, rng, -1, 1);
  std::uniform_int_distribution<int> low(-16, 8);  // unselected codes: -2 .. 1 on the 1/8 grid
  const int64_t pool = c.one_expert ? c.e : 3 * c.e / 4;
  std::vector<int64_t> cand(size_t(pool - 1));
  std::iota(cand.begin(), cand.end(), 1);
  for (int64_t t = 0; t < c.t; ++t) {
    uint16_t* row = x.data_as<uint16_t>() + t * c.d;
    for (int64_t e = 0; e < c.e; ++e) row[e] = f32_to_bf16(float(low(rng)) / 8.f);
    std::vector<int64_t> chosen;
    if (c.one_expert) {
      chosen = {3};
    } else {
      std::shuffle(cand.begin(), cand.end(), rng);
      chosen.push_back(0);
      chosen.insert(chosen.end(), cand.begin(), cand.begin() + (c.k - 1));
      std::shuffle(chosen.begin(), chosen.end(), rng);
    }
    for (size_t j = 0; j < chosen.size(); ++j) row[chosen[j]] = f32_to_bf16(4.f - float(j) / 8.f);
  }
  return x;
}

GluParams act_of(const Shape& c) {
  GluParams a;
  a.act = c.situ ? GluAct::situ : GluAct::silu;
  return a;
}

// Whether the warp-specialized kernel takes these experts (options.h GroupedGemmKernel): stacked dense bf16.
bool ws_applies(const Shape& c) { return !c.mxfp4 && !c.separate; }

// The layer on the GPU (tensor-core path forced) against the CPU, once per grouped GEMM kernel that applies
// (cp_async always; warp_specialized for stacked dense bf16 experts, where the automatic choice must pick it): each
// within kBar of the CPU, and the two kernels' outputs bit-identical (the same wgmma sequence per element:
// grouped_gemm_ws.cuh "Numerics"). A forced warp_specialized kernel on experts it cannot take throws.
void check_against_cpu(const Shape& c) {
  SCOPED_TRACE(name_of(c));
  std::mt19937_64 rng(uint64_t(c.d * 7 + c.e * 13 + c.k * 17 + c.inter + c.t + (c.situ ? 1 : 0)));
  const HostLayer h(c, rng);
  const Tensor xh = host_x(c, rng);
  const RouterParams router{int(c.k), true, 2.446f};

  const Layer cpu(h, c, Device::cpu());
  const Tensor xc = to_device(xh, Device::cpu());
  const Tensor out_c(DType::f32, {c.t, c.d}), ids_c(DType::i32, {c.t, c.k}), w_c(DType::f32, {c.t, c.k});
  latent_moe(xc, cpu.w, router, act_of(c), 1e-5f, out_c, ids_c, w_c);
  const std::vector<float> ref = to_host_f32(out_c);

  const Device dev = Device::cuda(0);
  const Layer gpu(h, c, dev);
  const Tensor xg = to_device(xh, dev);
  EXPECT_EQ(cuda::expert_layout(gpu.experts).stacked, !c.separate);
  using cuda::GroupedGemmKernel;
  // Runs the layer with the given kernel choice; returns the output bytes; checks the kernel that ran.
  const auto run = [&](GroupedGemmKernel kernel, bool want_ws) {
    const Tensor out_g(DType::f32, {c.t, c.d}, dev), ids_g(DType::i32, {c.t, c.k}, dev),
        w_g(DType::f32, {c.t, c.k}, dev);
    cuda::ExpertPathRecord rec;
    {
      const cuda::ScopedExpertPathOptions tc(cuda::ExpertPathOptions{
          .decode = cuda::DecodeExpertPath::tensor_cores,
          .grouped_gemm = kernel,
          .mlp_glu = c.fused_glu ? cuda::MlpGluPath::fused : cuda::MlpGluPath::automatic,
          .record = &rec});
      latent_moe(xg, gpu.w, router, act_of(c), 1e-5f, out_g, ids_g, w_g);
    }
    synchronize(dev);
    EXPECT_EQ(rec.wgmma, 1) << "the tensor-core path ran";
    EXPECT_EQ(rec.mlp_fused, c.fused_glu ? 1 : 0) << "the shared MLP's GLU path";
    EXPECT_EQ(rec.wgmma_warp_specialized, want_ws ? 1 : 0) << "the warp-specialized kernel ran";
    EXPECT_EQ(rec.wgmma_cp_async, want_ws ? 0 : 1) << "the cp.async kernel ran";
    EXPECT_EQ(bytes_of(ids_g), bytes_of(ids_c)) << "routing differs";
    const std::vector<float> got = to_host_f32(out_g);
    for (const float v : got) EXPECT_TRUE(std::isfinite(v));
    const double err = rel_rms(got, ref);
    EXPECT_LE(err, kBar);
    std::printf("  %s (%s kernel): relative RMS %.3g\n", name_of(c).c_str(), want_ws ? "warp-specialized" : "cp.async",
                err);
    return bytes_of(out_g);
  };
  const std::vector<uint8_t> cp_async = run(GroupedGemmKernel::cp_async, false);
  if (!ws_applies(c)) {
    EXPECT_EQ(run(GroupedGemmKernel::automatic, false), cp_async) << "the automatic choice differs";
    const Tensor out_g(DType::f32, {c.t, c.d}, dev);
    const cuda::ScopedExpertPathOptions ws(cuda::ExpertPathOptions{
        .decode = cuda::DecodeExpertPath::tensor_cores, .grouped_gemm = GroupedGemmKernel::warp_specialized});
    EXPECT_THROW(latent_moe(xg, gpu.w, router, act_of(c), 1e-5f, out_g, {}, {}), Error);
    return;
  }
  EXPECT_EQ(run(GroupedGemmKernel::warp_specialized, true), cp_async) << "the two kernels differ";
  EXPECT_EQ(run(GroupedGemmKernel::automatic, true), cp_async) << "the automatic choice differs";
}

TEST(CudaMoeGrouped, SmallShapesMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  check_against_cpu({256, 0, 16, 4, 64, 100, false, false});   // I = 64: half a gate/up tile; T % 128 != 0
  check_against_cpu({256, 128, 16, 4, 192, 150, true, false});  // latent + norm, SiTU, I = 192: a partial N tile
  check_against_cpu({256, 0, 16, 8, 64, 200, true, false});    // expert 0: 200 rows (2 M-tiles)
  check_against_cpu({256, 0, 16, 1, 64, 300, true, true});     // every token on expert 3: 3 M-tiles, 15 empty
  check_against_cpu({192, 0, 16, 1, 64, 260, false, true});    // d = 192: k not a multiple of the 64-wide k-step
  check_against_cpu({256, 0, 16, 1, 64, 256, false, true});    // one expert: exactly 2 full M-tiles
  check_against_cpu({256, 0, 16, 4, 64, 100, false, false, false, true});  // separately allocated experts
}

// Many more tiles than SMs: every CTA of the persistent warp-specialized kernel walks several tiles (the producer
// runs into the next tile while the consumers store the last), ragged experts (a quarter empty, expert 0 with
// every token: 33 M-tiles), a partial N tile (I = 192) and a partial last k-tile of down (k = 192).
TEST(CudaMoeGrouped, ManyTilesPerCtaMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  check_against_cpu({256, 0, 64, 8, 192, 4096, true, false});
  check_against_cpu({256, 0, 16, 1, 192, 3000, false, true});  // 3000 rows on one expert, 15 empty
}

TEST(CudaMoeGrouped, KimiLinearWidthsMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  check_against_cpu({2304, 0, 32, 8, 1024, 200, false, false});
  check_against_cpu({2304, 0, 32, 8, 1024, 130, true, false});
  check_against_cpu({2304, 0, 64, 8, 1024, 1024, false, false});  // 8192 rows: ~100 M-tiles x 8 or 9 N-tiles
  // the shared expert at its real width through the fused GLU (2 M-tiles, the second partial)
  check_against_cpu({2304, 0, 32, 8, 1024, 200, false, false, false, false, 1024, true});
}

// The shared MLP's GLU through glu_wgmma inside latent_moe at small widths: without and with a latent (SiTU), a
// partial N tile (I = 192), T not a multiple of the 128-row tile, and beside MXFP4 experts (the shared MLP stays
// bf16).
TEST(CudaMoeGrouped, SharedMlpThroughTheFusedGluMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  check_against_cpu({256, 0, 16, 4, 64, 100, false, false, false, false, 192, true});
  check_against_cpu({256, 128, 16, 4, 192, 150, true, false, false, false, 192, true});
  check_against_cpu({256, 0, 16, 8, 64, 300, true, false, true, false, 128, true});
}

TEST(CudaMoeGrouped, K3LatentWidthsMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  check_against_cpu({7168, 3584, 16, 8, 3072, 48, true, false});
  check_against_cpu({7168, 3584, 16, 8, 3072, 48, true, false, true});  // MXFP4 experts, as K3 ships them
}

// MXFP4 experts on the tensor-core path (decoded into the bf16 weight tile in shared memory), prefill and decode
// row counts: several M-tiles, a partial N tile, k not a multiple of the 64-wide k-step, every token on one expert.
TEST(CudaMoeGrouped, Mxfp4ExpertsMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  check_against_cpu({256, 0, 16, 4, 64, 100, false, false, true});
  check_against_cpu({256, 128, 16, 4, 192, 150, true, false, true});  // latent + norm, SiTU, partial N tile
  check_against_cpu({256, 0, 16, 8, 64, 200, true, false, true});     // expert 0: 2 M-tiles
  check_against_cpu({256, 0, 16, 1, 64, 300, true, true, true});      // every token on expert 3
  check_against_cpu({224, 0, 16, 1, 96, 260, false, true, true});     // k = 224 and 96: half a k-step at the end
  check_against_cpu({256, 0, 16, 4, 64, 1, false, false, true});      // decode: 1 token
  check_against_cpu({2304, 0, 32, 8, 1024, 3, true, false, true});    // decode: 3 tokens at Kimi-Linear widths
}

// bf16 experts at decode row counts (1 .. 8 tokens) take the tensor-core path too.
TEST(CudaMoeGrouped, DecodeRowCountsMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  check_against_cpu({256, 0, 16, 4, 64, 1, false, false});
  check_against_cpu({256, 128, 16, 4, 192, 8, true, false});
  check_against_cpu({2304, 0, 32, 8, 1024, 2, false, false});
}

// experts_wgmma itself on hand-made expert row counts (the first expert empty, exactly one M-tile, one row past
// it, empty experts between and at the end, a single row, several M-tiles with a partial last one; the experts'
// rows start at offsets that are not multiples of 128), with each grouped GEMM kernel forced: the two outputs
// bit-identical, and each within kBar of an fp64 reference of the same math (H = bf16(glu(zg W1_e^T, zg W3_e^T))
// rounded to bf16 like the kernels' H, ye = H W2_e^T). SiLU at P = 2's partial N tile (I = 192) and a partial
// last k-tile for down (k = 192 = 3 k-tiles; d = 320: 5 k-tiles, 2 N-tiles of down, the second partial).
TEST(CudaMoeGrouped, KernelsAgreeOnHandMadeRowCounts) {
  SKIP_WITHOUT_GPU();
  constexpr int64_t d = 320, inter = 192;
  const std::vector<int32_t> counts = {0, 128, 129, 0, 1, 300, 0, 0, 62, 0};
  const int64_t e_count = int64_t(counts.size());
  std::vector<int32_t> off(counts.size() + 1, 0);
  for (size_t e = 0; e < counts.size(); ++e) off[e + 1] = off[e] + counts[e];
  const int64_t rows = off.back();
  std::mt19937_64 rng(99);
  const double aw = std::sqrt(3.0 / double(d)), ad = std::sqrt(3.0 / double(inter));
  const Tensor zh = host_bf16({rows, d}, rng, -1, 1), w1 = host_bf16({e_count, inter, d}, rng, -aw, aw),
               w3 = host_bf16({e_count, inter, d}, rng, -aw, aw), w2 = host_bf16({e_count, d, inter}, rng, -ad, ad);
  Tensor offh(DType::i32, {e_count + 1});
  std::copy(off.begin(), off.end(), offh.data_as<int32_t>());

  // fp64 reference: expert e of row r
  const auto bf = [](const Tensor& t, int64_t i) { return double(bf16_to_f32(t.data_as<uint16_t>()[i])); };
  std::vector<float> ref(size_t(rows * d));
  std::vector<double> hrow(static_cast<size_t>(inter));
  for (int64_t e = 0; e < e_count; ++e)
    for (int64_t r = off[size_t(e)]; r < off[size_t(e) + 1]; ++r) {
      for (int64_t n = 0; n < inter; ++n) {
        double g = 0, u = 0;
        for (int64_t c = 0; c < d; ++c) {
          g += bf(zh, r * d + c) * bf(w1, (e * inter + n) * d + c);
          u += bf(zh, r * d + c) * bf(w3, (e * inter + n) * d + c);
        }
        hrow[size_t(n)] = double(bf16_to_f32(f32_to_bf16(float(g / (1 + std::exp(-g)) * u))));
      }
      for (int64_t n = 0; n < d; ++n) {
        double y = 0;
        for (int64_t c = 0; c < inter; ++c) y += hrow[size_t(c)] * bf(w2, (e * d + n) * inter + c);
        ref[size_t(r * d + n)] = float(y);
      }
    }

  const Device dev = Device::cuda(0);
  const Tensor zg = to_device(zh, dev), p1 = to_device(w1, dev), p3 = to_device(w3, dev), p2 = to_device(w2, dev),
               offd = to_device(offh, dev);
  const auto slice = [&](const Tensor& pool, int64_t e, int64_t out, int64_t in) {
    return Weight{TensorView(static_cast<char*>(pool.view().data) + e * out * in * 2, DType::bf16, {out, in}, dev), {}};
  };
  std::vector<MlpWeights> experts;
  for (int64_t e = 0; e < e_count; ++e)
    experts.push_back(MlpWeights{slice(p1, e, inter, d), slice(p3, e, inter, d), slice(p2, e, d, inter)});
  const cuda::ExpertLayout layout = cuda::expert_layout(experts);
  ASSERT_TRUE(layout.stacked);
  const cuda::ExpertRows er{static_cast<const int32_t*>(offd.view().data), nullptr, rows, rows};
  const GluParams act;
  const auto run = [&](cuda::GroupedGemmKernel kernel, DType yt) {
    const Tensor ye(yt, {rows, d}, dev);
    cuda::ExpertPathRecord rec;
    const cuda::ScopedExpertPathOptions o(cuda::ExpertPathOptions{.grouped_gemm = kernel, .record = &rec});
    cuda::experts_wgmma(zg.view().data, d, experts, layout, er, act, ye.view().data, yt, nullptr);
    synchronize(dev);
    EXPECT_EQ(rec.wgmma_warp_specialized, kernel == cuda::GroupedGemmKernel::warp_specialized ? 1 : 0);
    const std::vector<float> got = yt == DType::bf16 ? bf16_to_host_f32(ye) : to_host_f32(ye);
    for (const float v : got) EXPECT_TRUE(std::isfinite(v));
    const double err = rel_rms(got, ref);
    EXPECT_LE(err, kBar);
    std::printf("  hand-made row counts (%s kernel, ye %s): relative RMS %.3g against fp64\n",
                kernel == cuda::GroupedGemmKernel::warp_specialized ? "warp-specialized" : "cp.async",
                std::string(dtype_name(yt)).c_str(), err);
    return bytes_of(ye);
  };
  const std::vector<uint8_t> cp_async = run(cuda::GroupedGemmKernel::cp_async, DType::f32);
  EXPECT_EQ(run(cuda::GroupedGemmKernel::warp_specialized, DType::f32), cp_async) << "the two kernels differ";
  // bf16 ye: each element the one rounding of the same fp32 sum (round to nearest even), bit for bit
  std::vector<uint8_t> want(cp_async.size() / 2);
  for (size_t i = 0; i < want.size() / 2; ++i) {
    float v;
    std::memcpy(&v, cp_async.data() + 4 * i, 4);
    const uint16_t b = f32_to_bf16(v);
    std::memcpy(want.data() + 2 * i, &b, 2);
  }
  for (const auto kernel : {cuda::GroupedGemmKernel::cp_async, cuda::GroupedGemmKernel::warp_specialized})
    EXPECT_EQ(run(kernel, DType::bf16), want) << "bf16 ye is not bf16 of the f32 ye";
  const Tensor bad(DType::f16, {rows, d}, dev);
  EXPECT_THROW(cuda::experts_wgmma(zg.view().data, d, experts, layout, er, act, bad.view().data, DType::f16, nullptr),
               Error);
}

// cuda::mlp's fused GLU (glu_wgmma: gate, up and the GLU in one grouped-GEMM launch, options.h MlpGluPath) through
// the public operator against an fp64 reference of the same math (h = bf16(act(x W1^T) * x W3^T), y = h W2^T
// (+ y0 with beta 1)): T not a multiple of the 128-row tile (300, and 1), I = 192 (a partial N tile), d = 320 (a
// partial k-tile of down), SiLU and SiTU, beta 0 and 1, each grouped GEMM kernel forced (bit-identical to each other,
// each within kBar); the separate path (cuBLAS + glu_kernel, forced) within kBar too; and the automatic rule: fused
// exactly when ceil(T / 128) ceil(I / 128) >= the SM count, separate at decode sizes and for f32 x (where a forced
// fused throws).
TEST(CudaMoeGrouped, MlpFusedGluMatchesFp64) {
  SKIP_WITHOUT_GPU();
  constexpr int64_t d = 320, inter = 192;
  std::mt19937_64 rng(7);
  const double aw = std::sqrt(3.0 / double(d)), ad = std::sqrt(3.0 / double(inter));
  const Tensor w1 = host_bf16({inter, d}, rng, -aw, aw), w3 = host_bf16({inter, d}, rng, -aw, aw),
               w2 = host_bf16({d, inter}, rng, -ad, ad);
  const Device dev = Device::cuda(0);
  const Tensor g1 = to_device(w1, dev), g3 = to_device(w3, dev), g2 = to_device(w2, dev);
  const MlpWeights w{Weight{g1, {}}, Weight{g3, {}}, Weight{g2, {}}};
  const auto bf = [](const Tensor& t, int64_t i) { return double(bf16_to_f32(t.data_as<uint16_t>()[i])); };
  using cuda::MlpGluPath;
  for (const int64_t t : {int64_t(300), int64_t(1)})
    for (const bool situ : {false, true})
      for (const float beta : {0.f, 1.f}) {
        SCOPED_TRACE("T=" + std::to_string(t) + (situ ? " situ" : " silu") + " beta=" + std::to_string(beta));
        GluParams act;
        act.act = situ ? GluAct::situ : GluAct::silu;
        const Tensor xh = host_bf16({t, d}, rng, -1, 1);
        Tensor y0(DType::f32, {t, d});
        for (int64_t i = 0; i < y0.numel(); ++i) y0.data_as<float>()[i] = float(std::sin(double(i)));
        std::vector<float> ref(size_t(t * d));
        std::vector<double> h(static_cast<size_t>(inter));
        for (int64_t r = 0; r < t; ++r) {
          for (int64_t n = 0; n < inter; ++n) {
            double g = 0, u = 0;
            for (int64_t c = 0; c < d; ++c) {
              g += bf(xh, r * d + c) * bf(w1, n * d + c);
              u += bf(xh, r * d + c) * bf(w3, n * d + c);
            }
            const double sg = 1 / (1 + std::exp(-g));
            const double v = situ ? double(act.situ_beta) * std::tanh(g / double(act.situ_beta)) * sg *
                                        double(act.situ_linear_beta) * std::tanh(u / double(act.situ_linear_beta))
                                  : g * sg * u;
            h[size_t(n)] = double(bf16_to_f32(f32_to_bf16(float(v))));
          }
          for (int64_t n = 0; n < d; ++n) {
            double y = beta != 0.f ? double(y0.data_as<float>()[r * d + n]) : 0.0;
            for (int64_t c = 0; c < inter; ++c) y += h[size_t(c)] * bf(w2, n * inter + c);
            ref[size_t(r * d + n)] = float(y);
          }
        }
        const Tensor x = to_device(xh, dev);
        const auto run = [&](MlpGluPath path, cuda::GroupedGemmKernel kernel, const char* what) {
          const Tensor y = to_device(y0, dev);
          cuda::ExpertPathRecord rec;
          {
            const cuda::ScopedExpertPathOptions o(
                cuda::ExpertPathOptions{.grouped_gemm = kernel, .mlp_glu = path, .record = &rec});
            mlp(x, w, act, y, beta);
          }
          synchronize(dev);
          EXPECT_EQ(rec.mlp_fused, path == MlpGluPath::fused ? 1 : 0);
          EXPECT_EQ(rec.mlp_separate, path == MlpGluPath::separate ? 1 : 0);
          const std::vector<float> got = to_host_f32(y);
          for (const float v : got) EXPECT_TRUE(std::isfinite(v));
          const double err = rel_rms(got, ref);
          EXPECT_LE(err, kBar);
          std::printf("  mlp T=%lld %s beta=%g (%s): relative RMS %.3g against fp64\n", static_cast<long long>(t),
                      situ ? "situ" : "silu", double(beta), what, err);
          return bytes_of(y);
        };
        const std::vector<uint8_t> cp = run(MlpGluPath::fused, cuda::GroupedGemmKernel::cp_async, "fused, cp.async");
        EXPECT_EQ(run(MlpGluPath::fused, cuda::GroupedGemmKernel::warp_specialized, "fused, warp-specialized"), cp)
            << "the two kernels differ";
        run(MlpGluPath::separate, cuda::GroupedGemmKernel::automatic, "separate");
      }

  // The automatic rule: the tile count against the SM count.
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  const int64_t n_tiles = (inter + 127) / 128, fill = (sms + n_tiles - 1) / n_tiles * 128;  // rows that fill
  for (const int64_t t : {int64_t(8), fill - 128, fill}) {
    const Tensor x = to_device(host_bf16({t, d}, rng, -1, 1), dev), y(DType::f32, {t, d}, dev);
    cuda::ExpertPathRecord rec;
    {
      const cuda::ScopedExpertPathOptions o(cuda::ExpertPathOptions{.record = &rec});
      mlp(x, w, GluParams{}, y);
    }
    synchronize(dev);
    EXPECT_EQ(rec.mlp_fused, t == fill ? 1 : 0) << "T=" << t << " on " << sms << " SMs";
  }
  // f32 x: never fused; forcing it throws before any work
  const Tensor xf(DType::f32, {300, d}, dev), yf(DType::f32, {300, d}, dev);
  const cuda::ScopedExpertPathOptions o(cuda::ExpertPathOptions{.mlp_glu = MlpGluPath::fused});
  EXPECT_THROW(mlp(xf, w, GluParams{}, yf), Error);
}

// The tensor-core path recorded into a CUDA graph replays bit-identically to the eager runs (also with the shared
// MLP through the fused GLU: its offsets written by a launch, nothing from the host).
TEST(CudaMoeGrouped, PrefillPathCapturesInAGraphAndReplaysBitIdentically) {
  SKIP_WITHOUT_GPU();
  for (const Shape& c : {Shape{256, 0, 16, 4, 64, 100, false, false}, Shape{256, 128, 16, 4, 192, 150, true, false},
                         Shape{256, 0, 16, 1, 64, 300, true, true}, Shape{256, 128, 16, 4, 192, 150, true, false, true},
                         Shape{256, 0, 16, 4, 64, 2, false, false, true},
                         Shape{256, 0, 16, 4, 64, 100, false, false, false, false, 192, true},
                         Shape{256, 128, 16, 4, 192, 150, true, false, false, false, 192, true}}) {
    SCOPED_TRACE(name_of(c));
    std::mt19937_64 rng(uint64_t(31 + c.t));
    const HostLayer h(c, rng);
    const Device dev = Device::cuda(0);
    const Layer gpu(h, c, dev);
    const Tensor x1 = to_device(host_x(c, rng), dev), x2 = to_device(host_x(c, rng), dev);
    const Tensor x(DType::bf16, {c.t, c.d}, dev), out(DType::bf16, {c.t, c.d}, dev);
    const RouterParams router{int(c.k), true, 2.446f};
    cudaStream_t s;
    ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
    Context ctx;
    ctx.cuda_stream = s;
    const cuda::ScopedExpertPathOptions tc(cuda::ExpertPathOptions{
        .decode = cuda::DecodeExpertPath::tensor_cores,
        .mlp_glu = c.fused_glu ? cuda::MlpGluPath::fused : cuda::MlpGluPath::automatic});
    const auto run = [&] { latent_moe(x, gpu.w, router, act_of(c), 1e-5f, out, {}, {}, 0.f, ctx); };
    copy(x, x1);
    run();
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    const std::vector<uint8_t> want1 = bytes_of(out);
    copy(x, x2);
    run();
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    const std::vector<uint8_t> want2 = bytes_of(out);
    EXPECT_NE(want1, want2);

    copy(x, x1);
    cudaGraph_t g = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    EXPECT_NO_THROW(run());
    ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
    cudaGraphExec_t ge;
    ASSERT_EQ(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(ge, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(bytes_of(out), want1) << "replay on the captured input";
    copy(x, x2);
    ASSERT_EQ(cudaGraphLaunch(ge, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(bytes_of(out), want2) << "replay on a new input";
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    cudaStreamDestroy(s);
  }
}

}  // namespace
}  // namespace kimi
#endif  // KIMI_WITH_CUDA
