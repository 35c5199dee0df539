// mla_decode's absorb / merge / project work split on CUDA (src/cuda/mla/decode_proj.cuh) through the public operator,
// against the CPU backend on the same values: Kimi-Linear (H 32) and K3-class (H 64) heads at R 512, P 64, Dn = Dv
// 128, batches of 1, 3, 32 and 128 sequences at ragged lengths in reversed cache rows, gated and not, strided q and o,
// f32 and bf16 caches, through both attends (f32 queries: the FFMA family at the f32 bar 1e-5; bf16 queries: the tensor
// cores at the bf16 bar 5e-3); an odd shape (R 61: a partial 8-column chunk, f16 weights with padded rows); CUDA graph
// replays bit-identical to the eager call. The launch shapes (src/cuda/mla/decode_plan.h) are host code, tested in
// every build.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "cuda/mla/decode_plan.h"
#include "kimi/dtype.h"
#include "kimi/ops/mla.h"
#include "tensor_testutil.h"
#ifdef KIMI_WITH_CUDA
#include <cuda_runtime.h>

#include "cuda/mla/decode_options.h"
#endif

namespace kimi {
namespace {

// The H200 (132 SMs) at the benchmark shapes (R 512 + P 64): the default head group (all heads, <= 64 per CTA) while
// it fills a wave with few tiles per CTA; 16-head groups where a CTA's queries and partials would outweigh its tiles
// (one sequence, short caches).
TEST(MlaDecodePlan, HeadGroupsShrinkOnlyWhereTheFixedCostDominates) {
  using cuda::mla::tc_decode_plan;
  const auto plan = [](int64_t N, int64_t H, int64_t len, int64_t esz) {
    const cuda::mla::TcDecodePlan p = tc_decode_plan(N, H, len, 512, 576, esz, 132);
    return std::pair<int64_t, int64_t>{p.head_group, p.splits};
  };
  using P = std::pair<int64_t, int64_t>;
  EXPECT_EQ(plan(1, 64, 32768, 2), P(64, 128));
  EXPECT_EQ(plan(1, 64, 32768, 4), P(64, 128));
  EXPECT_EQ(plan(1, 32, 32768, 4), P(32, 128));
  EXPECT_EQ(plan(32, 64, 4096, 2), P(64, 4));
  EXPECT_EQ(plan(32, 32, 4096, 4), P(32, 4));
  EXPECT_EQ(plan(128, 64, 4096, 2), P(64, 1));
  EXPECT_EQ(plan(1, 96, 32768, 4), P(48, 64));  // K3: 2 groups of 48
  EXPECT_EQ(plan(1, 32, 512, 4), P(16, 16));    // 16 tiles: 32 CTAs of 16 heads instead of 16 of 32
  EXPECT_EQ(plan(1, 64, 512, 2), P(16, 16));
  EXPECT_EQ(plan(1, 64, 4096, 2), P(16, 32));   // 128 CTAs of 4 tiles instead of 128 of 1 tile and 64 heads
  EXPECT_EQ(plan(3, 4, 40, 2), P(4, 2));        // H < 16: never split
  // the splits of the default group are tc_decode_splits' (N sequences x ceil(H / 64) groups)
  EXPECT_EQ(plan(2, 96, 32768, 4).second, cuda::mla::tc_decode_splits(4, 32768, 48, 512, 576, 4, 132));
}

TEST(MlaDecodePlan, ProjectRowsAndMergeGroups) {
  using cuda::mla::decode_absorb_tokens;
  using cuda::mla::decode_merge_groups;
  using cuda::mla::decode_project_rows;
  // N = 1 (one token block): 16 rows per CTA, 8 row blocks per head: 256 (H 32) / 512 (H 64) CTAs
  EXPECT_EQ(decode_project_rows(128, 32, 1, 132), 16);
  EXPECT_EQ(decode_project_rows(128, 64, 1, 132), 16);
  // N = 32 (4 token blocks), N = 128 (16): more rows per CTA as the token blocks fill the waves
  EXPECT_EQ(decode_project_rows(128, 32, 4, 132), 32);
  EXPECT_EQ(decode_project_rows(128, 64, 4, 132), 48);
  EXPECT_EQ(decode_project_rows(128, 64, 16, 132), 128);
  EXPECT_EQ(decode_project_rows(24, 36, 1, 132), 16);
  // merge (units of 4 columns: 128 at R 512): 8 split groups over 128 splits at N = 1 (4 CTAs per head); fewer
  // groups, whole rows per CTA, where few splits meet a large batch
  EXPECT_EQ(decode_merge_groups(1, 128, 64, 128, 132), 1);
  EXPECT_EQ(decode_merge_groups(128, 128, 64, 1, 132), 8);
  EXPECT_EQ(decode_merge_groups(4, 128, 64, 32, 132), 2);   // 2048 CTAs of a whole row each
  EXPECT_EQ(decode_merge_groups(7, 128, 32, 32, 132), 2);
  EXPECT_EQ(decode_merge_groups(44, 128, 64, 3, 132), 4);   // 384 CTAs (8 groups: 768)
  EXPECT_EQ(decode_merge_groups(3, 128, 32, 1, 132), 2);
  EXPECT_EQ(decode_merge_groups(9, 61, 36, 1, 132), 8);     // R 61: units of one column
  EXPECT_EQ(decode_absorb_tokens(128), 8);
  EXPECT_EQ(decode_absorb_tokens(4096), 3);  // 3 x 4096 f32 q rows in 48 KB
  EXPECT_EQ(decode_absorb_tokens(12224), 1);
}

#ifdef KIMI_WITH_CUDA
using testutil::copy_to;
using testutil::all_finite;
using testutil::host_values;
using testutil::ints;
using testutil::rel_rms;

const Device gpu = Device::cuda(0);

struct Cfg {
  int64_t H, R, P, Dn, Dv;
};

// Values exactly representable in bf16 (so f32 and bf16 tensors of them hold the same numbers), uniform in [lo, hi].
Tensor bf16_values(DType dt, std::vector<int64_t> shape, std::mt19937_64& rng, double lo, double hi) {
  Tensor h(dt, std::span<const int64_t>(shape));
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < h.numel(); ++i) {
    uint16_t b = 0;
    store_from_f32(&b, DType::bf16, 0, float(u(rng)));
    store_from_f32(h.data(), dt, i, load_as_f32(&b, DType::bf16, 0));
  }
  return h;
}

// A host tensor's values in dtype dt (converted on the host), on device d.
Tensor converted(const Tensor& t, DType dt, Device d) {
  Tensor h(dt, std::span<const int64_t>(t.view().shape.data(), size_t(t.view().ndim)));
  for (int64_t i = 0; i < t.numel(); ++i) store_from_f32(h.data(), dt, i, load_as_f32(t.data(), t.view().dtype, i));
  return d.type == DeviceType::cpu ? std::move(h) : copy_to(h, d);
}

// The [N, H, Dv] values of o (a view into `big`, which may pad the rows).
std::vector<double> o_values(const Tensor& big, int64_t N, int64_t H, int64_t Dv) {
  const std::vector<double> all = host_values(big);
  const int64_t row = big.view().shape[2];
  std::vector<double> v;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t e = 0; e < Dv; ++e) v.push_back(all[size_t((n * H + h) * row + e)]);
  return v;
}

// Lengths of a batch of N: one long sequence at N = 1 (many splits: the merge), long / 1 / tile-edge at N = 3, and
// ragged tile-edge lengths beyond.
std::vector<int64_t> lens_for(int64_t N) {
  if (N == 1) return {3000};
  if (N == 3) return {3000, 1, 65};
  const std::vector<int64_t> pat{1, 2, 31, 33, 64, 65, 257, 700};
  std::vector<int64_t> l;
  for (int64_t n = 0; n < N; ++n) l.push_back(pat[size_t((5 * n + 3) % int64_t(pat.size()))]);
  return l;
}

class MlaDecodeProj : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (these run on the GPU machine)";
  }
};

// One batch through both attends against the CPU backend: f32 q / f32 weights (FFMA, 1e-5) and bf16 q / bf16 weights
// (tensor cores, 5e-3), the same numbers; o f32, strided rows (and q strided) when `strided`.
void check_batch(const Cfg& c, int64_t N, DType cache_dt, bool gated, bool strided, std::mt19937_64& rng,
                 DType w_ffma = DType::f32, int64_t w_pad = 0) {
  const std::vector<int64_t> lens = lens_for(N);
  int64_t L = 0;
  for (int64_t l : lens) L = std::max(L, l);
  const int64_t Dq = c.Dn + c.P, RP = c.R + c.P, Nc = N;
  std::vector<int64_t> slots;
  for (int64_t n = 0; n < N; ++n) slots.push_back(N - 1 - n);
  const Tensor lens_t = ints(DType::i32, lens), slots_t = ints(DType::i64, slots);

  Tensor cache_h(cache_dt, {Nc, L, RP});
  {
    std::uniform_real_distribution<double> lat(-1.7, 1.7), pe(-1.5, 1.5);
    for (int64_t i = 0; i < cache_h.numel(); ++i)
      store_from_f32(cache_h.data(), cache_dt, i, float(i % RP < c.R ? lat(rng) : pe(rng)));
  }
  const Tensor cache_d = copy_to(cache_h, gpu);
  const double a = std::sqrt(3.0 / double(c.R));
  // Weights [H (Dn + Dv), R] as a view of [.., R + w_pad] rows (w_pad > 0: a row stride other than R).
  const Tensor w_big = bf16_values(DType::f32, {c.H * (c.Dn + c.Dv), c.R + w_pad}, rng, -a, a);
  const int64_t qpad = strided ? 8 : 0, opad = strided ? 5 : 0;
  const Tensor q_big = bf16_values(DType::f32, {N, c.H, Dq + qpad}, rng, -2, 2);
  const Tensor g = bf16_values(DType::f32, {N, c.H * c.Dv}, rng, -4, 4);

  Tensor ref(DType::f32, {N, c.H, c.Dv});
  mla_decode(q_big.view().slice(2, 0, Dq), cache_h, lens_t, slots_t, Weight{w_big.view().slice(1, 0, c.R), {}},
             gated ? g.view() : TensorView{}, std::nullopt, ref);
  const std::vector<double> want = host_values(ref);

  for (bool tc : {false, true}) {
    SCOPED_TRACE(tc ? "tensor cores" : "ffma");
    const DType qdt = tc ? DType::bf16 : DType::f32, wdt = tc ? DType::bf16 : w_ffma;
    const Tensor q_d = converted(q_big, qdt, gpu), w_d = converted(w_big, wdt, gpu), g_d = converted(g, qdt, gpu);
    Tensor o_big(DType::f32, {N, c.H, c.Dv + opad}, gpu);
    cuda::MlaDecodeRecord rec;
    {
      const cuda::ScopedMlaDecodePath path(tc ? cuda::MlaDecodePath::tensor_cores : cuda::MlaDecodePath::ffma, &rec);
      mla_decode(q_d.view().slice(2, 0, Dq), cache_d, lens_t, slots_t, Weight{w_d.view().slice(1, 0, c.R), {}},
                 gated ? g_d.view() : TensorView{}, std::nullopt, o_big.view().slice(2, 0, c.Dv));
    }
    EXPECT_EQ(rec.tensor_cores, tc ? 1 : 0);
    EXPECT_EQ(rec.ffma, tc ? 0 : 1);
    EXPECT_EQ(rec.merges, rec.splits > 1 ? 1 : 0);
    if (N == 1) {
      EXPECT_GT(rec.splits, 1);  // the merge ran
    }
    const std::vector<double> got = o_values(o_big, N, c.H, c.Dv);
    EXPECT_TRUE(all_finite(got));
    EXPECT_LE(rel_rms(got, want), tc ? 5e-3 : 1e-5) << "splits " << rec.splits << " head group " << rec.head_group;
  }
}

// Kimi-Linear (H 32) and K3-class (H 64) heads over f32 and bf16 caches, N = 1 (the merge over many splits), 3, 32
// and 128 (one split: the project reads the attend's partial in place), gated and not; q and o strided when gated.
TEST_F(MlaDecodeProj, MatchesTheCpuBackend) {
  for (int64_t H : {32, 64}) {
    const Cfg c{H, 512, 64, 128, 128};
    for (int64_t N : {1, 3, 32, 128})
      for (DType cdt : {DType::f32, DType::bf16})
        for (bool gated : {false, true}) {
          SCOPED_TRACE("H=" + std::to_string(H) + " N=" + std::to_string(N) + " cache " +
                       std::string(dtype_name(cdt)) + (gated ? " gated, strided q / o" : ""));
          std::mt19937_64 rng(uint64_t(H * 1000 + N * 10 + (gated ? 1 : 0)));
          check_batch(c, N, cdt, gated, gated, rng);
        }
  }
}

// R = 61 (the last 8-column chunk partial), P = 13, Dn = 16, Dv = 24, H = 36 (partial head groups): weight rows padded
// to 64 elements (16-byte chunks with an element tail), f16 weights on the FFMA path; bf16 weights on the tensor cores.
TEST_F(MlaDecodeProj, OddShapesAndPaddedWeightRows) {
  const Cfg c{36, 61, 13, 16, 24};
  for (int64_t N : {1, 3, 32})
    for (bool gated : {false, true}) {
      SCOPED_TRACE("N=" + std::to_string(N) + (gated ? " gated" : ""));
      std::mt19937_64 rng(uint64_t(N * 3 + (gated ? 1 : 0)));
      check_batch(c, N, DType::f32, gated, true, rng, DType::f16, 3);
    }
}

// Captured with device lens / slots (the table written by the absorb): three replays equal the eager call with the
// same device tensors bit for bit, on both attends, with the merge (N = 1, many splits) and without it (N = 128 at
// H 64: one split).
TEST_F(MlaDecodeProj, CapturedReplaysEqualTheEagerCall) {
  const Cfg c{64, 512, 64, 128, 128};
  for (int64_t N : {1, 128})
    for (bool tc : {false, true}) {
      SCOPED_TRACE(std::string(tc ? "tensor cores" : "ffma") + " N=" + std::to_string(N));
      std::mt19937_64 rng(uint64_t(N + (tc ? 100 : 0)));
      const std::vector<int64_t> lens = lens_for(N);
      int64_t L = 0;
      for (int64_t l : lens) L = std::max(L, l);
      const int64_t Dq = c.Dn + c.P, RP = c.R + c.P;
      std::vector<int64_t> slots;
      for (int64_t n = 0; n < N; ++n) slots.push_back(N - 1 - n);
      const DType qdt = tc ? DType::bf16 : DType::f32;
      const Tensor cache = converted(bf16_values(DType::f32, {N, L, RP}, rng, -1.7, 1.7), DType::bf16, gpu);
      const double a = std::sqrt(3.0 / double(c.R));
      const Tensor w = converted(bf16_values(DType::f32, {c.H * (c.Dn + c.Dv), c.R}, rng, -a, a), qdt, gpu);
      const Tensor q = converted(bf16_values(DType::f32, {N, c.H, Dq + 8}, rng, -2, 2), qdt, gpu);
      const Tensor g = converted(bf16_values(DType::f32, {N, c.H * c.Dv}, rng, -4, 4), qdt, gpu);
      const Tensor d_lens = ints(DType::i32, lens, gpu), d_slots = ints(DType::i64, slots, gpu);
      Tensor o(DType::f32, {N, c.H, c.Dv + 5}, gpu), direct(DType::f32, {N, c.H, c.Dv + 5}, gpu);
      const auto call = [&](Tensor& out, const Context& ctx) {
        mla_decode(q.view().slice(2, 0, Dq), cache, d_lens, d_slots, Weight{w, {}}, g, std::nullopt,
                   out.view().slice(2, 0, c.Dv), ctx);
      };

      cudaStream_t s = nullptr;
      ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
      Context ctx;
      ctx.cuda_stream = s;
      cuda::MlaDecodeRecord rec;
      const cuda::ScopedMlaDecodePath path(tc ? cuda::MlaDecodePath::tensor_cores : cuda::MlaDecodePath::ffma, &rec);
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
      call(o, ctx);
      ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
      ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
      cudaGraphDestroy(graph);
      EXPECT_EQ(rec.merges, N == 1 ? 1 : 0);
      EXPECT_EQ(rec.splits > 1, N == 1);

      call(direct, ctx);
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      const std::vector<double> eager = o_values(direct, N, c.H, c.Dv);
      EXPECT_TRUE(all_finite(eager));
      for (int r = 0; r < 3; ++r) {
        ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
        ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
        EXPECT_EQ(o_values(o, N, c.H, c.Dv), eager) << "replay " << r;
      }
      cudaGraphExecDestroy(exec);
      cudaStreamDestroy(s);
    }
}
#endif  // KIMI_WITH_CUDA

}  // namespace
}  // namespace kimi
