// mla_decode's tensor-core attend on CUDA (src/cuda/mla/decode_tc.cuh) against the CPU backend through the public
// operator: both MLA configs (Kimi-Linear H 32, K3 H 96 from configs/k3.json) and odd shapes, batches of 1, 3 and 33
// sequences at lengths 1 .. 5000 in permuted cache rows, gated and not, f32 and bf16 caches; the FFMA kernel still
// taken (and at the f32 bar) for f32 queries; CUDA graph capture with device lens / slots, replays bit-identical.
// The same shapes forced onto the warpgroup-MMA attend (decode_wg.cuh: bf16 caches at R 512, P 64; H 32, 64 and
// 2 x 48), plus non-finite cache rows past the lengths and in the padding columns of a strided cache.
// The split plan (src/cuda/mla/decode_plan.h) is host code, tested in every build.
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

// One CTA per SM on an H200 (132 SMs) at the benchmark shapes (R 512 + P 64): one full wave of splits at N = 1,
// one wave of 4 splits per sequence at N = 32, no split at N = 128; never more splits than 32-row tiles.
TEST(MlaDecodePlan, SplitsFillOneWaveAtTheBenchmarkShapes) {
  using cuda::mla::tc_decode_splits;
  EXPECT_EQ(tc_decode_splits(1, 32768, 64, 512, 576, 4, 132), 128);
  EXPECT_EQ(tc_decode_splits(1, 32768, 64, 512, 576, 2, 132), 128);
  EXPECT_EQ(tc_decode_splits(32, 4096, 64, 512, 576, 4, 132), 4);
  EXPECT_EQ(tc_decode_splits(128, 4096, 64, 512, 576, 4, 132), 1);
  EXPECT_EQ(tc_decode_splits(1, 512, 32, 512, 576, 4, 132), 16);
  EXPECT_EQ(tc_decode_splits(32, 512, 32, 512, 576, 4, 132), 4);
  EXPECT_EQ(tc_decode_splits(1, 100, 32, 512, 576, 2, 132), 4);  // 4 tiles
  EXPECT_EQ(tc_decode_splits(1, 1, 32, 512, 576, 4, 132), 1);
  EXPECT_EQ(tc_decode_splits(2, 32768, 48, 512, 576, 4, 132), 64);  // K3: 2 head groups of 48 per sequence
}

#ifdef KIMI_WITH_CUDA
using testutil::copy_to;
using testutil::all_finite;
using testutil::host_values;
using testutil::ints;
using testutil::rel_rms;

const Device gpu = Device::cuda(0);

struct MlaCfg {
  const char* name;
  int64_t H, R, P, Dn, Dv;
};
constexpr MlaCfg kKimiLinear{"Kimi-Linear", 32, 512, 64, 128, 128};  // configs/kimi-linear-48b-a3b.json
constexpr MlaCfg kK3{"K3", 96, 512, 64, 128, 128};                     // configs/k3.json: 2 head groups of 48
constexpr MlaCfg kK3Tiny{"k3-tiny", 4, 64, 16, 32, 32};                // one 16-row head block
constexpr MlaCfg kOdd{"odd", 36, 64, 13, 16, 24};  // 3 head blocks, R + P = 77: padded columns, element loads
constexpr MlaCfg kH64{"H64", 64, 512, 64, 128, 128};  // one full 64-head group

Tensor uniform(DType dt, std::vector<int64_t> shape, std::mt19937_64& rng, double lo, double hi) {
  Tensor h(dt, std::span<const int64_t>(shape));
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < h.numel(); ++i) store_from_f32(h.data(), dt, i, float(u(rng)));
  return h;
}

// A latent cache pool [Nc, L, R + P] on the host: latent values in [-1.7, 1.7] (RMS-normalized scale), k_pe in
// [-1.5, 1.5]; every row holds data, so reading rows past a sequence's length would change the result.
Tensor cache_pool(const MlaCfg& c, DType dt, int64_t Nc, int64_t L, std::mt19937_64& rng) {
  const int64_t RP = c.R + c.P;
  Tensor h(dt, {Nc, L, RP});
  std::uniform_real_distribution<double> lat(-1.7, 1.7), pe(-1.5, 1.5);
  for (int64_t i = 0; i < h.numel(); ++i) store_from_f32(h.data(), dt, i, float(i % RP < c.R ? lat(rng) : pe(rng)));
  return h;
}

// The batches: lengths at and around the 32-row tile (1, 2, 63, 64, 65) and across many tiles and splits (1000, 5000),
// in the pool rows (7 n + 5) mod Nc (a permutation).
std::vector<std::vector<int64_t>> batches() {
  const std::vector<int64_t> lens{1, 2, 63, 64, 65, 1000, 5000};
  std::vector<int64_t> n33;
  for (int64_t n = 0; n < 33; ++n) n33.push_back(lens[size_t(n % 7)]);
  return {{5000}, {1, 1000, 64}, n33};
}
constexpr int64_t kNc = 34, kL = 5000;
std::vector<int64_t> slots_for(int64_t N) {
  std::vector<int64_t> s;
  for (int64_t n = 0; n < N; ++n) s.push_back((7 * n + 5) % kNc);
  return s;
}

class MlaDecodeTc : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (these run on the GPU machine)";
  }
};

// bf16 queries (the model's activations) over f32 and bf16 caches: the tensor cores run (the launcher's automatic
// choice) and agree with the CPU backend on the same values within the bf16 bar (relative RMS 5e-3;
// docs/ops/mla.md "CUDA decode" has the error budget).
TEST_F(MlaDecodeTc, MatchesTheCpuBackend) {
  for (const MlaCfg& c : {kKimiLinear, kK3, kK3Tiny, kOdd}) {
    std::mt19937_64 rng(uint64_t(c.H * 1000 + c.R));
    const int64_t Dq = c.Dn + c.P;
    const double a = std::sqrt(3.0 / double(c.R));
    const Tensor w = uniform(DType::bf16, {c.H * (c.Dn + c.Dv), c.R}, rng, -a, a), w_d = copy_to(w, gpu);
    for (DType cdt : {DType::f32, DType::bf16}) {
      const Tensor cache = cache_pool(c, cdt, kNc, kL, rng), cache_d = copy_to(cache, gpu);
      for (const std::vector<int64_t>& lens : batches()) {
        const int64_t N = int64_t(lens.size());
        const Tensor lens_t = ints(DType::i32, lens), slots_t = ints(DType::i64, slots_for(N));
        for (bool gated : {false, true}) {
          SCOPED_TRACE(std::string(c.name) + " cache " + std::string(dtype_name(cdt)) + " N=" + std::to_string(N) +
                       (gated ? " gated" : ""));
          const Tensor q = uniform(DType::bf16, {N, c.H, Dq}, rng, -2, 2), q_d = copy_to(q, gpu);
          const Tensor g = uniform(DType::bf16, {N, c.H * c.Dv}, rng, -4, 4), g_d = copy_to(g, gpu);
          Tensor ref(DType::f32, {N, c.H, c.Dv}), o(DType::f32, {N, c.H, c.Dv}, gpu);
          mla_decode(q, cache, lens_t, slots_t, Weight{w, {}}, gated ? g.view() : TensorView{}, std::nullopt, ref);
          cuda::MlaDecodeRecord rec;
          {
            const cuda::ScopedMlaDecodePath path(cuda::MlaDecodePath::automatic, &rec);
            mla_decode(q_d, cache_d, lens_t, slots_t, Weight{w_d, {}}, gated ? g_d.view() : TensorView{},
                       std::nullopt, o);
          }
          EXPECT_EQ(rec.tensor_cores, 1);
          EXPECT_EQ(rec.ffma, 0);
          const std::vector<double> got = host_values(o), want = host_values(ref);
          EXPECT_TRUE(all_finite(got));
          EXPECT_LE(rel_rms(got, want), 5e-3);
        }
      }
    }
  }
}

// Forced onto the warpgroup-MMA attend (MlaDecodePath::wgmma): it runs for bf16 caches at R 512, P 64 (H 32 padded
// to 64 rows, H 64, K3's 2 groups of 48) and meets the same bar over the same batches (lengths around and across the
// 64-row tile, empty splits where a short sequence shares the plan of a long one); an f32 cache keeps decode_tc.cuh.
TEST_F(MlaDecodeTc, WgmmaAttendMatchesTheCpuBackend) {
  for (const MlaCfg& c : {kKimiLinear, kH64, kK3}) {
    std::mt19937_64 rng(uint64_t(c.H * 1000 + c.R + 1));
    const int64_t Dq = c.Dn + c.P;
    const double a = std::sqrt(3.0 / double(c.R));
    const Tensor w = uniform(DType::bf16, {c.H * (c.Dn + c.Dv), c.R}, rng, -a, a), w_d = copy_to(w, gpu);
    for (DType cdt : {DType::bf16, DType::f32}) {
      const Tensor cache = cache_pool(c, cdt, kNc, kL, rng), cache_d = copy_to(cache, gpu);
      for (const std::vector<int64_t>& lens : batches()) {
        const int64_t N = int64_t(lens.size());
        const Tensor lens_t = ints(DType::i32, lens), slots_t = ints(DType::i64, slots_for(N));
        for (bool gated : {false, true}) {
          if (cdt == DType::f32 && (gated || N != 3)) continue;  // the fallback: one batch
          SCOPED_TRACE(std::string(c.name) + " cache " + std::string(dtype_name(cdt)) + " N=" + std::to_string(N) +
                       (gated ? " gated" : ""));
          const Tensor q = uniform(DType::bf16, {N, c.H, Dq}, rng, -2, 2), q_d = copy_to(q, gpu);
          const Tensor g = uniform(DType::bf16, {N, c.H * c.Dv}, rng, -4, 4), g_d = copy_to(g, gpu);
          Tensor ref(DType::f32, {N, c.H, c.Dv}), o(DType::f32, {N, c.H, c.Dv}, gpu);
          mla_decode(q, cache, lens_t, slots_t, Weight{w, {}}, gated ? g.view() : TensorView{}, std::nullopt, ref);
          cuda::MlaDecodeRecord rec;
          {
            const cuda::ScopedMlaDecodePath path(cuda::MlaDecodePath::wgmma, &rec);
            mla_decode(q_d, cache_d, lens_t, slots_t, Weight{w_d, {}}, gated ? g_d.view() : TensorView{},
                       std::nullopt, o);
          }
          EXPECT_EQ(rec.tensor_cores, 1);
          EXPECT_EQ(rec.wgmma, cdt == DType::bf16 ? 1 : 0);
          EXPECT_EQ(rec.ffma, 0);
          const std::vector<double> got = host_values(o), want = host_values(ref);
          EXPECT_TRUE(all_finite(got));
          EXPECT_LE(rel_rms(got, want), 5e-3);
        }
      }
    }
  }
}

// Cache rows past each sequence's length hold NaN (an unwritten cache may hold anything), and so do the padding
// columns of a strided cache (row stride 640 of 576 used): both attends ignore them (p = 0 and the rows zeroed
// before P C; the padding never loaded) and agree with the CPU backend. Lengths 1, 63 (a partial half tile),
// 100 (a partial second half), 128 (whole tiles), with slots in a different order.
TEST_F(MlaDecodeTc, RowsPastTheLengthDoNotReachTheOutput) {
  const MlaCfg c = kKimiLinear;
  std::mt19937_64 rng(1234);
  const int64_t Dq = c.Dn + c.P, RP = c.R + c.P, Nc = 5, L = 192, pad = 64;
  const double a = std::sqrt(3.0 / double(c.R));
  const Tensor w = uniform(DType::bf16, {c.H * (c.Dn + c.Dv), c.R}, rng, -a, a), w_d = copy_to(w, gpu);
  const std::vector<int64_t> lens{1, 63, 100, 128}, slots{3, 0, 4, 1};
  const int64_t N = int64_t(lens.size());
  Tensor pool(DType::bf16, {Nc, L, RP + pad});
  {
    const Tensor vals = cache_pool(c, DType::bf16, Nc, L, rng);
    std::vector<int64_t> len_of(size_t(Nc), 0);
    for (int64_t n = 0; n < N; ++n) len_of[size_t(slots[size_t(n)])] = lens[size_t(n)];
    for (int64_t sl = 0; sl < Nc; ++sl)
      for (int64_t j = 0; j < L; ++j)
        for (int64_t k = 0; k < RP + pad; ++k) {
          const bool data = j < len_of[size_t(sl)] && k < RP;
          store_from_f32(pool.data(), DType::bf16, (sl * L + j) * (RP + pad) + k,
                         data ? load_as_f32(vals.data(), DType::bf16, (sl * L + j) * RP + k) : NAN);
        }
  }
  const Tensor pool_d = copy_to(pool, gpu);
  const TensorView cache = pool.view().slice(2, 0, RP), cache_d = pool_d.view().slice(2, 0, RP);
  const Tensor lens_t = ints(DType::i32, lens), slots_t = ints(DType::i32, slots);
  const Tensor q = uniform(DType::bf16, {N, c.H, Dq}, rng, -2, 2), q_d = copy_to(q, gpu);
  Tensor ref(DType::f32, {N, c.H, c.Dv}), o(DType::f32, {N, c.H, c.Dv}, gpu);
  mla_decode(q, cache, lens_t, slots_t, Weight{w, {}}, {}, std::nullopt, ref);
  ASSERT_TRUE(all_finite(host_values(ref)));
  for (cuda::MlaDecodePath p : {cuda::MlaDecodePath::automatic, cuda::MlaDecodePath::wgmma}) {
    const bool wg = p == cuda::MlaDecodePath::wgmma;
    SCOPED_TRACE(wg ? "wgmma" : "mma.sync");
    cuda::MlaDecodeRecord rec;
    {
      const cuda::ScopedMlaDecodePath path(p, &rec);
      mla_decode(q_d, cache_d, lens_t, slots_t, Weight{w_d, {}}, {}, std::nullopt, o);
    }
    EXPECT_EQ(rec.tensor_cores, 1);
    EXPECT_EQ(rec.wgmma, wg ? 1 : 0);
    const std::vector<double> got = host_values(o);
    EXPECT_TRUE(all_finite(got));
    EXPECT_LE(rel_rms(got, host_values(ref)), 5e-3);
  }
}

// f32 queries keep the FFMA kernel and the f32 bar (1e-5); forced onto the tensor cores they meet the bf16 bar.
TEST_F(MlaDecodeTc, F32QueriesKeepTheFfmaKernel) {
  for (const MlaCfg& c : {kKimiLinear, kOdd}) {
    SCOPED_TRACE(c.name);
    std::mt19937_64 rng(uint64_t(c.H + 7));
    const int64_t Dq = c.Dn + c.P, L = 1100, Nc = 4;
    const double a = std::sqrt(3.0 / double(c.R));
    const Tensor w = uniform(DType::f32, {c.H * (c.Dn + c.Dv), c.R}, rng, -a, a), w_d = copy_to(w, gpu);
    const Tensor cache = cache_pool(c, DType::f32, Nc, L, rng), cache_d = copy_to(cache, gpu);
    const std::vector<int64_t> lens{1100, 65, 1};
    const Tensor lens_t = ints(DType::i32, lens), slots_t = ints(DType::i32, {2, 0, 3});
    const Tensor q = uniform(DType::f32, {3, c.H, Dq}, rng, -2, 2), q_d = copy_to(q, gpu);
    const Tensor g = uniform(DType::f32, {3, c.H * c.Dv}, rng, -4, 4), g_d = copy_to(g, gpu);
    Tensor ref(DType::f32, {3, c.H, c.Dv}), o(DType::f32, {3, c.H, c.Dv}, gpu);
    mla_decode(q, cache, lens_t, slots_t, Weight{w, {}}, g, std::nullopt, ref);
    for (cuda::MlaDecodePath p : {cuda::MlaDecodePath::automatic, cuda::MlaDecodePath::tensor_cores}) {
      cuda::MlaDecodeRecord rec;
      {
        const cuda::ScopedMlaDecodePath path(p, &rec);
        mla_decode(q_d, cache_d, lens_t, slots_t, Weight{w_d, {}}, g_d, std::nullopt, o);
      }
      const bool tc = p == cuda::MlaDecodePath::tensor_cores;
      EXPECT_EQ(rec.tensor_cores, tc ? 1 : 0);
      EXPECT_EQ(rec.ffma, tc ? 0 : 1);
      EXPECT_LE(rel_rms(host_values(o), host_values(ref)), tc ? 5e-3 : 1e-5) << (tc ? "tensor cores" : "ffma");
    }
  }
}

// Captured with device lens / slots (read by the attend itself): every replay equals the first bit for bit and the
// uncaptured call with the same device tensors; a length outside [1, L] or a slot outside [0, Nc) makes that
// sequence's o NaN and leaves the others bit-identical.
// Run for the mma.sync attend over an f32 cache and the warpgroup-MMA attend over a bf16 cache.
void check_captured_replays(cuda::MlaDecodePath attend, DType cache_dt) {
  const MlaCfg c = kKimiLinear;
  std::mt19937_64 rng(99);
  const int64_t Dq = c.Dn + c.P, N = 3, Nc = 5, L = 2048;
  const double a = std::sqrt(3.0 / double(c.R));
  const Tensor w = copy_to(uniform(DType::bf16, {c.H * (c.Dn + c.Dv), c.R}, rng, -a, a), gpu);
  const Tensor cache_h = cache_pool(c, cache_dt, Nc, L, rng), cache = copy_to(cache_h, gpu);
  const Tensor q_h = uniform(DType::bf16, {N, c.H, Dq}, rng, -2, 2), q = copy_to(q_h, gpu);
  const std::vector<int64_t> lens{2048, 65, 1}, slots{4, 0, 2};
  Tensor d_lens = ints(DType::i64, lens, gpu);
  Tensor d_slots = ints(DType::i32, slots, gpu);
  Tensor o(DType::f32, {N, c.H, c.Dv}, gpu), direct(DType::f32, {N, c.H, c.Dv}, gpu);

  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  Context ctx;
  ctx.cuda_stream = s;
  cuda::MlaDecodeRecord rec;
  const cuda::ScopedMlaDecodePath path(attend, &rec);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  mla_decode(q, cache, d_lens, d_slots, Weight{w, {}}, {}, std::nullopt, o, ctx);
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  cudaGraphDestroy(graph);
  EXPECT_EQ(rec.tensor_cores, 1);
  EXPECT_EQ(rec.wgmma, attend == cuda::MlaDecodePath::wgmma ? 1 : 0);

  std::vector<double> first;
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    const std::vector<double> v = host_values(o);
    if (r == 0) first = v;
    EXPECT_EQ(v, first) << "replay " << r;
  }
  mla_decode(q, cache, d_lens, d_slots, Weight{w, {}}, {}, std::nullopt, direct, ctx);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(host_values(direct), first);
  Tensor ref(DType::f32, {N, c.H, c.Dv});
  mla_decode(q_h, cache_h, ints(DType::i32, lens), ints(DType::i32, slots), Weight{copy_to(w, Device::cpu()), {}}, {},
             std::nullopt, ref);
  EXPECT_LE(rel_rms(first, host_values(ref)), 5e-3);

  // sequence 1's length 0: NaN there, the others unchanged
  copy(d_lens.view(), ints(DType::i64, {2048, 0, 1}).view());
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  const std::vector<double> bad = host_values(o);
  const size_t per = size_t(c.H * c.Dv);
  for (size_t i = 0; i < bad.size(); ++i) {
    if (i / per == 1)
      EXPECT_TRUE(std::isnan(bad[i])) << i;
    else
      EXPECT_EQ(bad[i], first[i]) << i;
  }
  // sequence 2's slot out of range (lengths restored): NaN there, the others as the first replay
  copy(d_lens.view(), ints(DType::i64, lens).view());
  copy(d_slots.view(), ints(DType::i32, {4, 0, Nc}).view());
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  const std::vector<double> bad_slot = host_values(o);
  for (size_t i = 0; i < bad_slot.size(); ++i) {
    if (i / per == 2)
      EXPECT_TRUE(std::isnan(bad_slot[i])) << i;
    else
      EXPECT_EQ(bad_slot[i], first[i]) << i;
  }
  cudaGraphExecDestroy(exec);
  cudaStreamDestroy(s);
}

TEST_F(MlaDecodeTc, CapturedReplaysAreBitIdentical) {
  {
    SCOPED_TRACE("mma.sync, f32 cache");
    check_captured_replays(cuda::MlaDecodePath::automatic, DType::f32);
  }
  {
    SCOPED_TRACE("wgmma, bf16 cache");
    check_captured_replays(cuda::MlaDecodePath::wgmma, DType::bf16);
  }
}
#endif  // KIMI_WITH_CUDA

}  // namespace
}  // namespace kimi
