// mla_prefill's bf16 attention on CUDA (src/cuda/mla/prefill_gemm.cu, prefill_flash.cu, flash.cuh) through the
// public operator, on a CUDA device (registered in a build with the CUDA backend only, tests/cuda_tests.h, and
// skipped there without a device; CI has none, so these run on the GPU machine: scripts/gpu/).
//   - Both fused kernels (flash.cuh on mma.sync, flash_fa3.cuh on wgmma + TMA where its head sizes fit; each forced
//     through src/cuda/mla/options.h and checked to be what ran; a forced fa3 elsewhere is an Error) and the default
//     against the CPU backend in f32 on the same bf16-rounded inputs (itself within 1e-5 of the fp64 oracle: the
//     harness), relative RMS <= 5e-3 (SPEC 14's bf16 bar), no NaN / Inf: both MLA configs (Kimi-Linear H = 32 and
//     K3 H = 96, R = 512, P = 64, Dn = Dv = 128), gated and ungated, the varlen batch [1, 63, 64, 65, 300, 1000]
//     (not multiples of the 128-query or 64-key tiles; 8 query tiles in the longest), one sequence of 2048, a batch
//     B = 2 without cu_seqlens, f32 o and an f32 gate.
//   - Against the fp64 oracle directly (src/verify/oracle/mla.h) on a smaller batch.
//   - Each kernel instance (DK, DV) = (64, 64), (128, 128), (192, 128), (256, 128) at head sizes that select it.
//   - The launcher's choice: the fa3 kernel by default at its head sizes, the mma.sync one at the others; the score
//     blocks where the fused kernels cannot read the inputs (P not a multiple of 8, a q row stride not a multiple of
//     8) or where forced, all correct.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kimi/device.h"
#include "kimi/error.h"
#include "kimi/ops/mla.h"
#include "tensor_testutil.h"
#include "verify/oracle/mla.h"
#ifdef KIMI_WITH_CUDA
#include "cuda/mla/options.h"
#endif

namespace kimi {
namespace {

#ifdef KIMI_WITH_CUDA
constexpr double kBar = 5e-3;  // SPEC 14: bf16 inputs, relative RMS error on o

using cuda::MlaLaunchOptions;
using cuda::MlaLaunchRecord;
using cuda::MlaPrefillPath;
using testutil::all_finite;
using testutil::host_values;
using testutil::rel_rms_or_abs;

struct Cfg {
  const char* name;
  int64_t H, R, P, Dn, Dv;
};
constexpr Cfg kKimiLinear{"kimi-linear", 32, 512, 64, 128, 128};  // configs/kimi-linear-48b-a3b.json
constexpr Cfg kK3{"k3", 96, 512, 64, 128, 128};                   // configs/k3.json
const std::vector<int64_t> kLens{1, 63, 64, 65, 300, 1000};

// A host tensor of dtype dt with values uniform in [lo, hi) (rounded to dt).
Tensor random_host(DType dt, std::initializer_list<int64_t> shape, double lo, double hi, std::mt19937_64& rng) {
  Tensor t(dt, shape);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) store_from_f32(t.data(), dt, i, float(u(rng)));
  return t;
}

// The same values in a new f32 host tensor.
Tensor as_f32(const Tensor& t) {
  const TensorView v = t.view();
  Tensor f(DType::f32, std::span<const int64_t>(v.shape.data(), size_t(v.ndim)));
  const std::vector<double> x = host_values(t);
  for (size_t i = 0; i < x.size(); ++i) f.data_as<float>()[i] = float(x[i]);
  return f;
}

// One prefill problem: bf16 host inputs (the harness's ranges: RMS-normalized latent, W_kvb of unit gain, gate
// logits +-4), B sequences of T tokens or one packed batch of `lens`.
struct Problem {
  Cfg c;
  int64_t B, T;
  std::vector<int64_t> offsets;  // varlen: N + 1 offsets (B = 1)
  bool gated;
  Tensor q, latent, k_pe, w, gate, cu;

  Problem(const Cfg& cfg, int64_t b, int64_t t, const std::vector<int64_t>& lens, bool g, uint64_t seed,
          DType gate_dtype = DType::bf16)
      : c(cfg), B(b), T(t), gated(g) {
    if (!lens.empty()) {
      testutil::Varlen packed(lens);
      offsets = packed.offsets, cu = std::move(packed.cu);
      B = 1, T = offsets.back();
    }
    std::mt19937_64 rng(seed);
    const double a = std::sqrt(3.0 / double(c.R));
    q = random_host(DType::bf16, {B, T, c.H, c.Dn + c.P}, -2, 2, rng);
    latent = random_host(DType::bf16, {B, T, c.R}, -1.7, 1.7, rng);
    k_pe = random_host(DType::bf16, {B, T, c.P}, -1.5, 1.5, rng);
    w = random_host(DType::bf16, {c.H * (c.Dn + c.Dv), c.R}, -a, a, rng);
    gate = random_host(gate_dtype, {B, T, c.H * c.Dv}, -4, 4, rng);
  }
  TensorView cu_view() const { return offsets.empty() ? TensorView{} : cu.view(); }

  // The CUDA operator with `path` forced; what ran is added to `rec`. q_pad > 0 stores q with rows of Dq + q_pad.
  std::vector<double> gpu(MlaPrefillPath path, MlaLaunchRecord& rec, DType o_dtype = DType::bf16,
                          int64_t q_pad = 0) const {
    const Device dev = Device::cuda(0);
    const int64_t Dq = c.Dn + c.P;
    Tensor q_padded(DType::bf16, {B, T, c.H, Dq + q_pad});  // q's values in the first Dq of each row
    const int64_t rows = B * T * c.H;
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(q_padded.data_as<uint16_t>() + r * (Dq + q_pad), q.data_as<const uint16_t>() + r * Dq,
                  size_t(Dq) * 2);
    const Tensor qd_buf = testutil::copy_to(q_padded, dev);
    const TensorView qd = qd_buf.view().slice(3, 0, Dq);
    const Tensor ld = testutil::copy_to(latent, dev), pd = testutil::copy_to(k_pe, dev);
    const Tensor wd = testutil::copy_to(w, dev), gd = testutil::copy_to(gate, dev);
    const Tensor o(o_dtype, {B, T, c.H, c.Dv}, dev);
    {
      const cuda::ScopedMlaLaunchOptions scope(MlaLaunchOptions{.prefill = path, .record = &rec});
      mla_prefill(qd, ld, pd, Weight{wd, {}}, gated ? gd.view() : TensorView{}, cu_view(), std::nullopt, o);
    }
    return host_values(o);
  }

  // The CPU backend in f32 on the same (bf16-rounded) values.
  std::vector<double> cpu() const {
    const Tensor qf = as_f32(q), lf = as_f32(latent), pf = as_f32(k_pe), wf = as_f32(w), gf = as_f32(gate);
    const Tensor o(DType::f32, {B, T, c.H, c.Dv});
    mla_prefill(qf, lf, pf, Weight{wf, {}}, gated ? gf.view() : TensorView{}, cu_view(), std::nullopt, o);
    return host_values(o);
  }

  // The fp64 oracle (SPEC 6 written plainly), per sequence.
  std::vector<double> oracle() const {
    const std::vector<double> qv = host_values(q), lv = host_values(latent), pv = host_values(k_pe);
    const std::vector<double> wv = host_values(w), gv = host_values(gate);
    std::vector<std::pair<int64_t, int64_t>> seqs;
    if (offsets.empty())
      for (int64_t b = 0; b < B; ++b) seqs.push_back({b * T, T});
    else
      for (size_t i = 0; i + 1 < offsets.size(); ++i) seqs.push_back({offsets[i], offsets[i + 1] - offsets[i]});
    const int64_t Dq = c.Dn + c.P, HDv = c.H * c.Dv;
    const auto part = [](const std::vector<double>& v, int64_t first, int64_t n) {
      return oracle::Vec(v.begin() + first, v.begin() + first + n);
    };
    std::vector<double> ref(size_t(B * T * HDv));
    for (auto [m0, len] : seqs) {
      std::vector<int64_t> pos(static_cast<size_t>(len));
      for (int64_t i = 0; i < len; ++i) pos[size_t(i)] = i;
      const oracle::Vec g = part(gv, m0 * HDv, len * HDv);
      const oracle::Vec y = oracle::mla_attention(part(qv, m0 * c.H * Dq, len * c.H * Dq), pos,
                                                  part(lv, m0 * c.R, len * c.R), part(pv, m0 * c.P, len * c.P), len,
                                                  wv, gated ? &g : nullptr, {c.H, c.R, c.Dn, c.P, c.Dv},
                                                  1.0 / std::sqrt(double(Dq)));
      std::copy(y.begin(), y.end(), ref.begin() + m0 * HDv);
    }
    return ref;
  }
};

std::string describe(const Problem& p) {
  std::string s = std::string(p.c.name) + " H=" + std::to_string(p.c.H) + " Dn=" + std::to_string(p.c.Dn) +
                  " P=" + std::to_string(p.c.P) + " Dv=" + std::to_string(p.c.Dv) + " B=" + std::to_string(p.B) +
                  " T=" + std::to_string(p.T);
  if (!p.offsets.empty()) s += " varlen";
  return s + (p.gated ? " gate" : "");
}

// flash_fa3.cuh's head sizes (mla_flash_fa3_supported: Dn, P, Dv multiples of 64 filling an instance); elsewhere a
// forced fused_fa3 is an Error and the default runs the mma.sync kernel.
bool fa3_runs(const Cfg& c) {
  const int64_t dk = c.Dn + c.P;
  return c.Dn % 64 == 0 && c.P % 64 == 0 && c.Dv % 64 == 0 &&
         ((dk == 64 && c.Dv == 64) || (dk >= 128 && dk <= 256 && c.Dv == 128));
}

// Each fused kernel (mma.sync; FlashAttention-3 where the head sizes allow it, else an Error) and the default (fa3
// where it runs, else mma.sync) ran exactly once and is within the bar of `ref`.
void expect_fused_matches(const Problem& p, const std::vector<double>& ref, DType o_dtype = DType::bf16) {
  const bool fa3_fits = fa3_runs(p.c);
  if (!fa3_fits) {
    MlaLaunchRecord rec;
    EXPECT_THROW(p.gpu(MlaPrefillPath::fused_fa3, rec, o_dtype), Error) << describe(p) << " [forced fa3]";
    EXPECT_EQ(rec.prefill_fused + rec.prefill_fused_fa3 + rec.prefill_blocks, 0) << describe(p);
  }
  for (MlaPrefillPath path : {MlaPrefillPath::fused, MlaPrefillPath::fused_fa3, MlaPrefillPath::automatic}) {
    if (path == MlaPrefillPath::fused_fa3 && !fa3_fits) continue;
    const bool fa3 = path == MlaPrefillPath::fused_fa3 || (path == MlaPrefillPath::automatic && fa3_fits);
    const std::string what = describe(p) + (path == MlaPrefillPath::automatic ? " [default: " : " [") +
                             (fa3 ? "fa3]" : "mma.sync]");
    MlaLaunchRecord rec;
    const std::vector<double> got = p.gpu(path, rec, o_dtype);
    EXPECT_EQ(fa3 ? rec.prefill_fused_fa3 : rec.prefill_fused, 1) << what;
    EXPECT_EQ(rec.prefill_fused + rec.prefill_fused_fa3, 1) << what;
    EXPECT_EQ(rec.prefill_blocks, 0) << what;
    ASSERT_TRUE(all_finite(got)) << what;
    const double err = rel_rms_or_abs(got, ref);
    EXPECT_LE(err, kBar) << what;
    std::printf("[mla fused] %-72s rel RMS %.2e\n", what.c_str(), err);
  }
}

class MlaPrefillCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (these run on the GPU machine)";
  }
};

TEST_F(MlaPrefillCuda, FusedMatchesCpuOnVarlenBatches) {
  uint64_t seed = 1;
  for (const Cfg& c : {kKimiLinear, kK3})
    for (bool gated : {false, true}) {
      const Problem p(c, 1, 0, kLens, gated, seed++);
      expect_fused_matches(p, p.cpu());
    }
}

TEST_F(MlaPrefillCuda, FusedMatchesCpuOnLongAndBatchedSequences) {
  const Problem one(kK3, 1, 2048, {}, true, 11);  // 16 query tiles, 32 key tiles
  expect_fused_matches(one, one.cpu());
  const Problem batched(kKimiLinear, 2, 300, {}, false, 12);  // B = 2 without cu_seqlens
  expect_fused_matches(batched, batched.cpu());
  // f32 o, f32 gate: the epilogue's other dtypes
  const Problem f32_out(kKimiLinear, 1, 0, {130, 1, 257}, true, 13, DType::f32);
  expect_fused_matches(f32_out, f32_out.cpu(), DType::f32);
}

TEST_F(MlaPrefillCuda, FusedMatchesOracle) {
  const Problem p(kKimiLinear, 1, 0, {65, 1, 200}, true, 21);
  expect_fused_matches(p, p.oracle());
}

TEST_F(MlaPrefillCuda, EveryKernelInstance) {
  // (Dn + P, Dv) -> instance (DK, DV): (48, 32) -> (64, 64); (96, 64) -> (128, 128); (136, 128) -> (192, 128);
  // (256, 128) -> (256, 128); (128, 128) filled exactly; the K3-tiny head sizes with its gate among them. The fa3
  // form runs at dk256 and dk128 (whole 64-column boxes) and is refused elsewhere.
  const Cfg cfgs[] = {{"k3-tiny", 4, 64, 16, 32, 32},
                      {"dk96", 6, 128, 32, 64, 64},
                      {"dk136", 5, 96, 8, 128, 120},
                      {"dk256", 3, 128, 64, 192, 128},
                      {"dk128", 4, 96, 64, 64, 128}};  // (128, 128) filled exactly: the fa3 kernel's instance
  uint64_t seed = 31;
  for (const Cfg& c : cfgs) {
    const Problem p(c, 1, 0, {1, 63, 64, 65, 300}, true, seed++);
    expect_fused_matches(p, p.cpu());
  }
}

TEST_F(MlaPrefillCuda, LauncherPicksFusedWhereItCanAndBlocksElsewhere) {
  const Problem p(kKimiLinear, 1, 0, {65, 1, 130}, true, 41);
  const std::vector<double> ref = p.cpu();
  {  // default at Kimi's head sizes: the FlashAttention-3 kernel
    MlaLaunchRecord rec;
    const std::vector<double> got = p.gpu(MlaPrefillPath::automatic, rec);
    EXPECT_EQ(rec.prefill_fused_fa3, 1);
    EXPECT_EQ(rec.prefill_fused + rec.prefill_blocks, 0);
    EXPECT_LE(rel_rms_or_abs(got, ref), kBar);
  }
  {  // forced blocks
    MlaLaunchRecord rec;
    const std::vector<double> got = p.gpu(MlaPrefillPath::blocks, rec);
    EXPECT_EQ(rec.prefill_blocks, 1);
    EXPECT_EQ(rec.prefill_fused, 0);
    EXPECT_LE(rel_rms_or_abs(got, ref), kBar);
  }
  {  // q rows 8-element aligned with padding: fused; a padding of 3 breaks the 16-byte alignment: blocks
    MlaLaunchRecord rec8, rec3;
    EXPECT_LE(rel_rms_or_abs(p.gpu(MlaPrefillPath::fused, rec8, DType::bf16, 8), ref), kBar);
    EXPECT_EQ(rec8.prefill_fused, 1);
    EXPECT_LE(rel_rms_or_abs(p.gpu(MlaPrefillPath::fused, rec3, DType::bf16, 3), ref), kBar);
    EXPECT_EQ(rec3.prefill_blocks, 1);
    EXPECT_EQ(rec3.prefill_fused, 0);
  }
  {  // P = 13: not a whole number of 16-byte chunks, blocks even when a fused kernel is asked for
    const Problem odd({"p13", 4, 64, 13, 16, 24}, 1, 0, {65, 3}, true, 42);
    const std::vector<double> odd_ref = odd.cpu();
    for (MlaPrefillPath path : {MlaPrefillPath::fused, MlaPrefillPath::fused_fa3, MlaPrefillPath::automatic}) {
      MlaLaunchRecord rec;
      EXPECT_LE(rel_rms_or_abs(odd.gpu(path, rec), odd_ref), kBar);
      EXPECT_EQ(rec.prefill_blocks, 1);
      EXPECT_EQ(rec.prefill_fused + rec.prefill_fused_fa3, 0);
    }
  }
}
#endif  // KIMI_WITH_CUDA

}  // namespace
}  // namespace kimi
