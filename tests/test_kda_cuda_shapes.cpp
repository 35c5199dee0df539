// The CUDA KDA kernels at issue 3's conformance shapes (SPEC 13), on a CUDA device (registered in a build with the
// CUDA backend only, tests/cuda_tests.h, and skipped there without a device; CI has none, so these run on the GPU
// machine: scripts/gpu/run_all.sh, results under docs/gpu/).
//   - kda_chunk_fwd (the tensor-core prefill) for T in {1, 15, 16, 17, 63, 64, 65, 1300, 8192, 65536}, the varlen
//     lengths [1300, 547, 2048, 963, 271, 3063], H in {8, 32, 64, 96}, both gate forms, both state layouts,
//     bf16 q / k / v / gate / beta, fp32 initial and final state; relative RMS error <= 5e-3 on o and on the final
//     state, and no NaN / Inf.
//   - The reference: the fp64 oracle (src/verify/oracle) where the host can afford it (B * T * H <= 32768 token-heads, a few seconds);
//     beyond, the CUDA token-by-token recurrence (kda_recurrent_fwd, fp32 state) on the same inputs, itself
//     checked against the oracle at 8192 tokens below (ReferenceRecurrenceMatchesOracle).
//   - Prefill followed by decode steps equals the longer prefill, on the GPU.
//   - Gate pre-activations and dt_bias swept over +-8 in both forms through the chunk kernel.
//   - The prep's three row-load paths (bulk copies, vector loads, generic loads) agree bit for bit, at both head
//     sizes and gate forms, and the launcher picks the one the inputs' alignment allows.
//   - The walk's two O epilogues (walk_rs.cuh: the O stage for a bf16 o with 16-byte aligned rows, per-element
//     stores otherwise): a bf16 o equals the fp32 o rounded once, plain and with segments (OEpiloguesAgree,
//     SegmentWalks).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kimi/device.h"
#include "kimi/ops/kda.h"
#include "verify/oracle/kda.h"
#include "tensor_testutil.h"
#ifdef KIMI_WITH_CUDA
#include "cuda/kda/chunk.h"
#endif

namespace kimi {
namespace {

#ifdef KIMI_WITH_CUDA
constexpr double kBar = 5e-3;  // issue 3: bf16 inputs, relative RMS error on o and the final state
constexpr int64_t kD = 128;    // K = V (the models' head dim)

using testutil::all_finite;
using testutil::host_values;
using testutil::rel_rms_or_abs;
const auto on = testutil::copy_to;

// x rounded to bf16 (nearest even; finite x), as the kernels round their fp32 outputs on a bf16 store
double bf16_round(double x) {
  uint32_t u;
  const float f = float(x);
  std::memcpy(&u, &f, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

// [N, H, A, B] <-> [N, H, B, A] (the kv and vk state layouts)
std::vector<double> transpose_state(const std::vector<double>& s, int64_t NH, int64_t A, int64_t B) {
  std::vector<double> t(s.size());
  for (int64_t m = 0; m < NH; ++m)
    for (int64_t i = 0; i < A; ++i)
      for (int64_t j = 0; j < B; ++j) t[size_t((m * B + j) * A + i)] = s[size_t((m * A + i) * B + j)];
  return t;
}

// One problem on the GPU: bf16 q, k, v, raw gate f, beta logits; fp32 A_log, dt_bias, initial state (kv or vk).
struct GpuProblem {
  int64_t B, T, H, N, D;  // D = K = V
  std::vector<int64_t> offsets;  // N + 1 when varlen
  GateForm form;
  StateLayout layout;
  Tensor q, k, v, f, beta, A_log, dt_bias, h0, cu;  // on the GPU (cu on the host, as the API allows)

  GpuProblem(int64_t b, int64_t t, int64_t h, std::vector<int64_t> lens, GateForm gf, StateLayout sl, uint64_t seed,
             double f_lo = -8, double f_hi = 8, int64_t d = kD)
      : B(b), T(t), H(h), N(lens.empty() ? b : int64_t(lens.size())), D(d), form(gf), layout(sl) {
    if (!lens.empty()) {
      testutil::Varlen packed(lens);
      offsets = packed.offsets, cu = std::move(packed.cu);
      B = 1, T = offsets.back();
    }
    std::mt19937_64 rng(seed);
    const Device gpu = Device::cuda(0);
    const auto make = [&](DType dt, std::initializer_list<int64_t> shape, double lo, double hi) {
      Tensor host(dt, shape);
      std::uniform_real_distribution<double> u(lo, hi);
      for (int64_t i = 0; i < host.numel(); ++i) store_from_f32(host.data(), dt, i, float(u(rng)));
      return on(host, gpu);
    };
    q = make(DType::bf16, {B, T, H, D}, -1, 1), k = make(DType::bf16, {B, T, H, D}, -1, 1);
    v = make(DType::bf16, {B, T, H, D}, -1, 1), f = make(DType::bf16, {B, T, H, D}, f_lo, f_hi);
    beta = make(DType::bf16, {B, T, H}, -4, 4);
    A_log = make(DType::f32, {H}, -2, 1), dt_bias = make(DType::f32, {H * D}, -2, 2);
    h0 = make(DType::f32, {N, H, D, D}, -0.5, 0.5);
  }

  KdaArgs args(TensorView o, TensorView ht) const {
    KdaArgs a;
    a.q = q, a.k = k, a.v = v, a.g = f, a.beta = beta, a.o = o;
    a.gate = KdaGate{form, A_log, dt_bias, -5.f};
    a.beta_sigmoid_in_kernel = a.qk_l2norm_in_kernel = true;
    a.initial_state = h0, a.final_state = ht;
    a.state_layout = layout;
    if (!offsets.empty()) a.cu_seqlens = cu;
    return a;
  }

  struct Result {
    std::vector<double> o, ht;  // ht in the kv layout
  };
  Result run(bool chunk, DType o_dtype = DType::f32) const {
    const Device gpu = Device::cuda(0);
    Tensor o(o_dtype, {B, T, H, D}, gpu), ht(DType::f32, {N, H, D, D}, gpu);
    const KdaArgs a = args(o, ht);
    chunk ? kda_chunk_fwd(a) : kda_recurrent_fwd(a);
    return result(o, ht);
  }
  // The CUDA chunk launcher itself with launch options (segments forced or off, the record of what ran).
  Result run_chunk(const cuda::KdaLaunchOptions& options, DType o_dtype = DType::f32) const {
    const Device gpu = Device::cuda(0);
    Tensor o(o_dtype, {B, T, H, D}, gpu), ht(DType::f32, {N, H, D, D}, gpu);
    cuda::kda_chunk_fwd(args(o, ht), 64, Context{}, &options);
    return result(o, ht);
  }
  Result result(const Tensor& o, const Tensor& ht) const {
    Result r{host_values(o), host_values(ht)};
    if (layout == StateLayout::vk) r.ht = transpose_state(r.ht, N * H, D, D);
    return r;
  }

  Result oracle() const {
    oracle::KdaProblem p;
    p.B = B, p.T = T, p.H = H, p.K = D, p.V = D;
    p.q = host_values(q), p.k = host_values(k), p.v = host_values(v), p.g = host_values(f);
    p.beta = host_values(beta);
    p.use_gate = true, p.bounded = form == GateForm::bounded;
    p.A_log = host_values(A_log), p.dt_bias = host_values(dt_bias), p.lower_bound = -5.0;
    p.beta_sigmoid = p.l2norm = true;
    p.h0 = host_values(h0);
    if (layout == StateLayout::vk) p.h0 = transpose_state(p.h0, N * H, D, D);  // the oracle takes kv
    p.cu = offsets;
    const oracle::KdaResult r = oracle::kda(p);
    return {r.o, r.ht};
  }
};

std::string name(const GpuProblem& p) {
  std::string s = p.offsets.empty() ? std::to_string(p.B) + " x " + std::to_string(p.T) : "varlen " + std::to_string(p.T);
  return s + " H=" + std::to_string(p.H) + (p.D != kD ? " D=" + std::to_string(p.D) : "") +
         (p.form == GateForm::bounded ? " bounded" : " softplus") + (p.layout == StateLayout::vk ? " vk" : " kv");
}

// The chunk kernel against the reference (the oracle when affordable, else the CUDA recurrence).
void expect_chunk_conforms(const GpuProblem& p) {
  const bool use_oracle = p.T * p.B * p.H <= 32768;
  const GpuProblem::Result got = p.run(true), ref = use_oracle ? p.oracle() : p.run(false);
  const double eo = rel_rms_or_abs(got.o, ref.o), eh = rel_rms_or_abs(got.ht, ref.ht);
  std::printf("[ kda_chunk_fwd cuda %-32s vs %-9s ] o %.2e  final state %.2e\n", name(p).c_str(),
              use_oracle ? "fp64" : "recurrent", eo, eh);
  EXPECT_TRUE(all_finite(got.o) && all_finite(got.ht)) << name(p);
  EXPECT_LE(eo, kBar) << name(p);
  EXPECT_LE(eh, kBar) << name(p);
}

class KdaCudaShapes : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (these run on the GPU machine)";
  }
};

// The reference used beyond the oracle's reach: the CUDA recurrence itself against fp64 at 8192 tokens.
TEST_F(KdaCudaShapes, ReferenceRecurrenceMatchesOracle) {
  const GpuProblem p(1, 8192, 2, {}, GateForm::bounded, StateLayout::kv, 7);
  const GpuProblem::Result got = p.run(false), ref = p.oracle();
  const double eo = rel_rms_or_abs(got.o, ref.o), eh = rel_rms_or_abs(got.ht, ref.ht);
  std::printf("[ kda_recurrent_fwd cuda 1 x 8192 H=2 vs fp64 ] o %.2e  final state %.2e\n", eo, eh);
  EXPECT_LE(eo, 1e-4);  // fp32 arithmetic on the bf16-rounded inputs the oracle also reads
  EXPECT_LE(eh, 1e-4);
}

TEST_F(KdaCudaShapes, ShortAndRaggedT) {
  uint64_t seed = 100;
  int i = 0;
  for (int64_t T : {1, 15, 16, 17, 63, 64, 65, 1300}) {
    const GateForm form = i % 2 ? GateForm::softplus : GateForm::bounded;
    const StateLayout layout = (i / 2) % 2 ? StateLayout::vk : StateLayout::kv;
    expect_chunk_conforms(GpuProblem(2, T, 8, {}, form, layout, seed++));
    ++i;
  }
}

TEST_F(KdaCudaShapes, LongSequences) {
  expect_chunk_conforms(GpuProblem(1, 8192, 32, {}, GateForm::bounded, StateLayout::vk, 200));
  expect_chunk_conforms(GpuProblem(1, 65536, 8, {}, GateForm::bounded, StateLayout::vk, 201));
  expect_chunk_conforms(GpuProblem(1, 65536, 8, {}, GateForm::softplus, StateLayout::kv, 202));
}

TEST_F(KdaCudaShapes, VarlenAndHeads) {
  const std::vector<int64_t> lens = {1300, 547, 2048, 963, 271, 3063};
  expect_chunk_conforms(GpuProblem(1, 0, 64, lens, GateForm::bounded, StateLayout::vk, 300));
  expect_chunk_conforms(GpuProblem(1, 0, 32, lens, GateForm::softplus, StateLayout::kv, 301));
  expect_chunk_conforms(GpuProblem(1, 1300, 96, {}, GateForm::bounded, StateLayout::kv, 302));
}

// prefill(T) == prefill(T - n) + n single-token decode steps on the GPU (chunk prefill, recurrent steps, one
// state buffer aliased in and out), against the reference recurrence over all T tokens.
TEST_F(KdaCudaShapes, PrefillThenDecodeMatchesLongerPrefill) {
  for (StateLayout layout : {StateLayout::kv, StateLayout::vk}) {
    const GpuProblem p(1, 1300, 32, {}, GateForm::bounded, layout, 400);
    const int64_t T = p.T, n = 6;
    const Device gpu = Device::cuda(0);
    Tensor o(DType::f32, {p.B, T, p.H, kD}, gpu), st(DType::f32, {p.N, p.H, kD, kD}, gpu);
    const auto tokens = [](TensorView x, int64_t t0, int64_t t1) { return x.slice(1, t0, t1); };
    KdaArgs a = p.args(o, st);
    a.q = tokens(p.q, 0, T - n), a.k = tokens(p.k, 0, T - n), a.v = tokens(p.v, 0, T - n);
    a.g = tokens(p.f, 0, T - n), a.beta = tokens(p.beta, 0, T - n), a.o = tokens(o, 0, T - n);
    kda_chunk_fwd(a);
    for (int64_t t = T - n; t < T; ++t) {
      KdaArgs d = p.args(tokens(o, t, t + 1), st);
      d.q = tokens(p.q, t, t + 1), d.k = tokens(p.k, t, t + 1), d.v = tokens(p.v, t, t + 1);
      d.g = tokens(p.f, t, t + 1), d.beta = tokens(p.beta, t, t + 1);
      d.initial_state = st;  // final_state aliases initial_state
      kda_recurrent_fwd(d);
    }
    const GpuProblem::Result ref = p.run(false), full = p.run(true);
    std::vector<double> got_ht = host_values(st);
    if (layout == StateLayout::vk) got_ht = transpose_state(got_ht, p.N * p.H, kD, kD);
    const std::vector<double> got_o = host_values(o);
    const double eo = rel_rms_or_abs(got_o, ref.o), eh = rel_rms_or_abs(got_ht, ref.ht);
    const double ef = rel_rms_or_abs(got_ht, full.ht);
    std::printf("[ prefill %lld + %lld decode steps, H=32, %s ] o %.2e  state %.2e vs recurrence, state %.2e vs "
                "the full prefill\n", static_cast<long long>(T - n), static_cast<long long>(n),
                layout == StateLayout::vk ? "vk" : "kv", eo, eh, ef);
    EXPECT_LE(eo, kBar);
    EXPECT_LE(eh, kBar);
    EXPECT_LE(ef, kBar);
  }
}

// Raw gate inputs and dt_bias at +-8 (the sweep range) in both forms: finite, and within the bar. Softplus
// also takes both of the prep's diagonal-block paths (prep.cuh, `dmma`): at f = 8 the 16-row blocks decay far beyond
// its limit (the per-pair loop), at f = -8 within it (tensor cores).
TEST_F(KdaCudaShapes, GateSweepExtremes) {
  for (GateForm form : {GateForm::softplus, GateForm::bounded}) {
    for (double f : {-8.0, 8.0}) {
      GpuProblem p(1, 300, 4, {}, form, StateLayout::vk, 500, f, f);  // every raw gate input = f
      Tensor dtb(DType::f32, {p.H * kD});
      for (int64_t i = 0; i < dtb.numel(); ++i) dtb.data_as<float>()[i] = i % 2 ? 8.f : -8.f;
      p.dt_bias = on(dtb, Device::cuda(0));
      expect_chunk_conforms(p);
    }
  }
}

// The prep's three row-load paths give the same bits: q, k, v and the gate input as views into padded buffers
// at an element offset of 0 (16-byte aligned rows: the bulk copies), 4 (8-byte aligned: the vector loads) and 1
// (2-byte aligned: the generic loads), with a short tail chunk (T = 150), both head sizes and both gate forms;
// each also against fp64, and the launcher's choice asserted. The walk reads its V tiles from v itself on the bulk
// path (Params::v_in_walk) and from the prep's scratch on the others, so the bits agreeing also checks its two V
// sources. The plain walk only (no segments).
TEST_F(KdaCudaShapes, RowLoadPathsAgree) {
  struct Config {
    int64_t D;
    GateForm form;
    StateLayout layout;
  };
  const Device gpu = Device::cuda(0);
  for (const Config& cfg : {Config{128, GateForm::bounded, StateLayout::vk},
                            Config{64, GateForm::softplus, StateLayout::kv},
                            Config{128, GateForm::softplus, StateLayout::kv}}) {
    const GpuProblem p(2, 150, 4, {}, cfg.form, cfg.layout, 600 + uint64_t(cfg.D), -8, 8, cfg.D);
    const int64_t D = p.D;
    const auto padded = [&](const Tensor& x, int64_t off, Tensor& owner) {  // x [B, T, H, D] at element offset off
      const std::vector<double> vals = host_values(x);
      Tensor host(DType::bf16, {p.B, p.T, p.H, D + 8});
      std::memset(host.data(), 0, size_t(host.numel()) * 2);
      for (int64_t r = 0; r < p.B * p.T * p.H; ++r)
        for (int64_t c = 0; c < D; ++c)
          store_from_f32(host.data(), DType::bf16, r * (D + 8) + off + c, float(vals[size_t(r * D + c)]));
      owner = on(host, gpu);
      return owner.view().slice(3, off, off + D);
    };
    const GpuProblem::Result ref = p.oracle();
    const std::string what = name(p);
    std::vector<GpuProblem::Result> got;
    for (int64_t off : {0, 4, 1}) {
      Tensor oq, ok, ov, of;
      Tensor o(DType::f32, {p.B, p.T, p.H, D}, gpu), ht(DType::f32, {p.N, p.H, D, D}, gpu);
      KdaArgs a = p.args(o, ht);
      a.q = padded(p.q, off, oq), a.k = padded(p.k, off, ok), a.v = padded(p.v, off, ov);
      a.g = padded(p.f, off, of);
      cuda::KdaLaunchRecord ran;
      const cuda::KdaLaunchOptions options{.segment_chunks = -1, .record = &ran};
      cuda::kda_chunk_fwd(a, 64, Context{}, &options);
      const cuda::KdaRowLoads expected = off == 0   ? cuda::KdaRowLoads::bulk
                                         : off == 4 ? cuda::KdaRowLoads::vector
                                                    : cuda::KdaRowLoads::generic;
      EXPECT_EQ(int(ran.row_loads), int(expected)) << what << " offset " << off;
      EXPECT_EQ(ran.segment_chunks, 0) << what;
      const GpuProblem::Result r = p.result(o, ht);
      const double eo = rel_rms_or_abs(r.o, ref.o), eh = rel_rms_or_abs(r.ht, ref.ht);
      std::printf("[ kda_chunk_fwd cuda %s, rows at element offset %lld vs fp64 ] o %.2e  final state %.2e\n",
                  what.c_str(), static_cast<long long>(off), eo, eh);
      EXPECT_LE(eo, kBar) << what << " offset " << off;
      EXPECT_LE(eh, kBar) << what << " offset " << off;
      got.push_back(r);
    }
    const auto differing = [](const std::vector<double>& x, const std::vector<double>& y) {
      size_t n = 0;
      for (size_t i = 0; i < x.size(); ++i) n += x[i] != y[i];
      return n;
    };
    for (size_t i = 1; i < got.size(); ++i) {
      EXPECT_EQ(differing(got[i].o, got[0].o), 0u) << what << ": load path " << i << " vs the bulk copies, o";
      EXPECT_EQ(differing(got[i].ht, got[0].ht), 0u) << what << ": load path " << i << " vs the bulk copies, state";
    }
  }
}

// A problem of the walk tests below: B sequences of T tokens (or varlen lens, B = 1), H heads, head size D.
struct WalkCase {
  int64_t B, T, H, D;
  std::vector<int64_t> lens;
  GateForm form;
  StateLayout layout;
};

// The number of elements of a bf16 o that differ from the fp32 o rounded to bf16 once.
size_t bf16_mismatches(const std::vector<double>& bf16_o, const std::vector<double>& f32_o) {
  size_t wrong = 0;
  for (size_t i = 0; i < f32_o.size(); ++i) wrong += bf16_o[i] != bf16_round(f32_o[i]);
  return wrong;
}

// The walk's two O epilogues (walk_rs.cuh): an fp32 o by per-element stores, a bf16 o (16-byte aligned rows) through
// the O stage. Each within the bar against fp64; the bf16 o is the fp32 o rounded once (the rest of the walk is the
// same for both); the record says which epilogue ran. The plain walk only (no segments).
TEST_F(KdaCudaShapes, OEpiloguesAgree) {
  for (const WalkCase& cfg : {WalkCase{2, 150, 4, 128, {}, GateForm::bounded, StateLayout::vk},
                              WalkCase{1, 0, 3, 128, {130, 64, 1, 0, 200}, GateForm::softplus, StateLayout::kv},
                              WalkCase{2, 150, 4, 64, {}, GateForm::softplus, StateLayout::kv},
                              WalkCase{1, 0, 2, 64, {64, 129, 17}, GateForm::bounded, StateLayout::vk}}) {
    const GpuProblem p(cfg.B, cfg.T, cfg.H, cfg.lens, cfg.form, cfg.layout, 700 + uint64_t(cfg.D), -8, 8, cfg.D);
    const GpuProblem::Result ref = p.oracle();
    cuda::KdaLaunchRecord ran;
    const cuda::KdaLaunchOptions options{.segment_chunks = -1, .record = &ran};
    const GpuProblem::Result r = p.run_chunk(options, DType::f32);
    EXPECT_FALSE(ran.o_staged) << name(p) << ": fp32 o";
    const double eo = rel_rms_or_abs(r.o, ref.o), eh = rel_rms_or_abs(r.ht, ref.ht);
    std::printf("[ kda_chunk_fwd cuda %s vs fp64 ] o %.2e  final state %.2e\n", name(p).c_str(), eo, eh);
    EXPECT_TRUE(all_finite(r.o) && all_finite(r.ht)) << name(p);
    EXPECT_LE(eo, kBar) << name(p);
    EXPECT_LE(eh, kBar) << name(p);
    const GpuProblem::Result rb = p.run_chunk(options, DType::bf16);
    EXPECT_TRUE(ran.o_staged) << name(p) << ": bf16 o";
    EXPECT_EQ(bf16_mismatches(rb.o, r.o), 0u) << name(p) << ": bf16 o vs the fp32 o rounded";
    EXPECT_TRUE(rb.ht == r.ht) << name(p) << ": the final state depends on o's dtype";
  }
}

// Sequence parallelism (chunk.cuh "Segments"): segments of 2 chunks forced, so that every sequence long enough has a
// first segment, middle segments (maps of value and identity columns) and a last one, and a short one has a single
// segment. Within the bar against fp64 with an fp32 o (per-element stores) and a bf16 o (the O stage), the bf16 o the
// fp32 o rounded once.
TEST_F(KdaCudaShapes, SegmentWalks) {
  for (const WalkCase& cfg : {WalkCase{1, 0, 3, 128, {330, 64, 1, 0, 200}, GateForm::bounded, StateLayout::vk},
                              WalkCase{2, 300, 2, 128, {}, GateForm::softplus, StateLayout::kv},
                              WalkCase{1, 0, 2, 64, {64, 400, 129}, GateForm::softplus, StateLayout::vk}}) {
    const GpuProblem p(cfg.B, cfg.T, cfg.H, cfg.lens, cfg.form, cfg.layout, 800 + uint64_t(cfg.D), -8, 8, cfg.D);
    const GpuProblem::Result ref = p.oracle();
    std::vector<GpuProblem::Result> got;
    for (const DType o_dtype : {DType::f32, DType::bf16}) {
      const std::string what = name(p) + (o_dtype == DType::f32 ? ", fp32 o" : ", bf16 o");
      cuda::KdaLaunchRecord ran;
      got.push_back(p.run_chunk({.segment_chunks = 2, .record = &ran}, o_dtype));
      EXPECT_EQ(ran.segment_chunks, 2) << what;
      const GpuProblem::Result& r = got.back();
      const double eo = rel_rms_or_abs(r.o, ref.o), eh = rel_rms_or_abs(r.ht, ref.ht);
      std::printf("[ kda_chunk_fwd cuda %s, segments of 2 chunks vs fp64 ] o %.2e  final state %.2e\n", what.c_str(),
                  eo, eh);
      EXPECT_TRUE(all_finite(r.o) && all_finite(r.ht)) << what;
      EXPECT_LE(eo, kBar) << what;
      EXPECT_LE(eh, kBar) << what;
    }
    EXPECT_EQ(bf16_mismatches(got[1].o, got[0].o), 0u) << name(p) << ": bf16 o vs the fp32 o rounded";
  }
}
// state_slots: sequence n starts from and ends in pool row slots[n], in place (initial_state = final_state = the
// pool), the other rows untouched. Bit for bit the unslotted call on the gathered states (same kernels, only the
// state rows' addresses differ), plain and with segments, both layouts, a zero-length sequence among them.
TEST_F(KdaCudaShapes, StateSlotsIndexThePool) {
  for (const int64_t seg : {int64_t(-1), int64_t(2)}) {
    for (const StateLayout layout : {StateLayout::kv, StateLayout::vk}) {
      const GpuProblem p(1, 0, 3, {330, 64, 0, 1, 200}, GateForm::bounded, layout, 900 + uint64_t(seg + 1));
      const int64_t N = p.N, H = p.H, D = p.D, S = N + 3, row = H * D * D;
      const std::vector<int64_t> slot{6, 0, 3, 7, 2};  // distinct rows of an 8-row pool
      const std::string what = name(p) + (seg > 0 ? ", segments of 2 chunks" : ", plain walk");
      // the pool: random rows, sequence n's initial state in row slot[n]
      std::vector<float> pool0(size_t(S * row));
      std::mt19937_64 rng(77);
      std::uniform_real_distribution<float> u(-0.5f, 0.5f);
      for (float& x : pool0) x = u(rng);
      const std::vector<double> h0 = host_values(p.h0);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t e = 0; e < row; ++e) pool0[size_t(slot[size_t(n)] * row + e)] = float(h0[size_t(n * row + e)]);
      Tensor pool_h(DType::f32, {S, H, D, D});
      std::memcpy(pool_h.data(), pool0.data(), pool0.size() * 4);
      const Tensor pool = on(pool_h, Device::cuda(0));
      Tensor slots(DType::i64, {N});
      std::memcpy(slots.data(), slot.data(), size_t(N) * 8);

      const Device gpu = Device::cuda(0);
      Tensor o(DType::bf16, {p.B, p.T, H, D}, gpu), ht(DType::f32, {N, H, D, D}, gpu);
      const cuda::KdaLaunchOptions plain{.segment_chunks = seg};
      cuda::kda_chunk_fwd(p.args(o, ht), 64, Context{}, &plain);
      Tensor os(DType::bf16, {p.B, p.T, H, D}, gpu);
      KdaArgs a = p.args(os, pool);
      a.initial_state = pool, a.state_slots = slots;
      cuda::KdaLaunchRecord ran;
      const cuda::KdaLaunchOptions opt{.segment_chunks = seg, .record = &ran};
      cuda::kda_chunk_fwd(a, 64, Context{}, &opt);
      EXPECT_EQ(ran.segment_chunks, seg > 0 ? seg : 0) << what;

      const std::vector<double> o_ref = host_values(o), o_got = host_values(os), ht_ref = host_values(ht),
                                pool_got = host_values(pool);
      ASSERT_EQ(o_got.size(), o_ref.size());
      size_t o_diff = 0, row_diff = 0, untouched_diff = 0;
      for (size_t i = 0; i < o_ref.size(); ++i) o_diff += o_got[i] != o_ref[i];
      for (int64_t n = 0; n < N; ++n)
        for (int64_t e = 0; e < row; ++e)
          row_diff += pool_got[size_t(slot[size_t(n)] * row + e)] != ht_ref[size_t(n * row + e)];
      for (int64_t r = 0; r < S; ++r) {
        if (std::find(slot.begin(), slot.end(), r) != slot.end()) continue;
        for (int64_t e = 0; e < row; ++e) untouched_diff += pool_got[size_t(r * row + e)] != pool0[size_t(r * row + e)];
      }
      EXPECT_EQ(o_diff, 0u) << what << ": o with state_slots vs without";
      EXPECT_EQ(row_diff, 0u) << what << ": slotted pool rows vs the unslotted final states";
      EXPECT_EQ(untouched_diff, 0u) << what << ": pool rows no sequence names";
    }
  }
}
#endif  // KIMI_WITH_CUDA

}  // namespace
}  // namespace kimi
