// Properties of kimi/ops/kda.h the harness cannot express, and bad-input tests.
//   - chunk == recurrent (fp32, rel. err <= 1e-5) over ragged T, chunk sizes and a varlen batch;
//   - prefill(T) == prefill(T - n) + n single-token decode steps (state hand-off), o and final state;
//   - gate pre-activations and dt_bias swept over +-8 in both forms: finite, <= 0, match the oracle;
//   - state layouts kv / vk: transposed states, identical o; final_state aliasing initial_state;
//   - zero-length sequences; every bad argument rejected with op, argument, expected and actual.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "expect_error.h"
#include "kimi/ops/kda.h"
#include "verify/oracle/kda.h"
#include "tensor_testutil.h"

namespace kimi {
namespace {

std::vector<float> values(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[size_t(i)] = load_as_f32(t.data(), t.view().dtype, i);
  return v;
}

std::vector<double> values64(const Tensor& t) {
  const std::vector<float> f = values(t);
  return {f.begin(), f.end()};
}

void fill(const Tensor& t, std::mt19937_64& rng, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) store_from_f32(t.data(), t.view().dtype, i, float(u(rng)));
}

double rel_err(const std::vector<float>& got, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (double(got[i]) - ref[i]) * (double(got[i]) - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// One random KDA problem in realistic ranges (FlashKDA's sweep), f32, contiguous.
struct Problem {
  int64_t B, T, H, K, V, N;
  std::vector<int64_t> offsets;  // N + 1 when varlen
  Tensor q, k, v, f, beta, A_log, dt_bias, h0, cu;
  GateForm form;

  Problem(int64_t b, int64_t t, int64_t h, int64_t kk, int64_t vv, std::vector<int64_t> lens = {},
          uint64_t seed = 1, GateForm gf = GateForm::softplus)
      : B(b), T(t), H(h), K(kk), V(vv), N(lens.empty() ? b : int64_t(lens.size())), form(gf) {
    if (!lens.empty()) {
      testutil::Varlen packed(lens);
      offsets = packed.offsets, cu = std::move(packed.cu);
      B = 1, T = offsets.back();
    }
    std::mt19937_64 rng(seed);
    q = Tensor(DType::f32, {B, T, H, K}), k = Tensor(DType::f32, {B, T, H, K}),
    v = Tensor(DType::f32, {B, T, H, V});
    f = Tensor(DType::f32, {B, T, H, K}), beta = Tensor(DType::f32, {B, T, H});
    A_log = Tensor(DType::f32, {H}), dt_bias = Tensor(DType::f32, {H * K}),
    h0 = Tensor(DType::f32, {N, H, K, V});
    fill(q, rng, -1, 1), fill(k, rng, -1, 1), fill(v, rng, -1, 1), fill(f, rng, -8, 8),
        fill(beta, rng, -4, 4);
    fill(A_log, rng, -2, 1), fill(dt_bias, rng, -8, 8), fill(h0, rng, -1, 1);
  }

  KdaArgs args(TensorView o, TensorView ht, bool with_h0 = true) const {
    KdaArgs a;
    a.q = q, a.k = k, a.v = v, a.g = f, a.beta = beta, a.o = o;
    a.gate = KdaGate{form, A_log, dt_bias, -5.f};
    a.beta_sigmoid_in_kernel = a.qk_l2norm_in_kernel = true;
    if (with_h0) a.initial_state = h0;
    a.final_state = ht;
    if (!offsets.empty()) a.cu_seqlens = cu;
    return a;
  }

  oracle::KdaResult oracle() const {
    oracle::KdaProblem p;
    p.B = B, p.T = T, p.H = H, p.K = K, p.V = V;
    p.q = values64(q), p.k = values64(k), p.v = values64(v), p.g = values64(f), p.beta = values64(beta);
    p.use_gate = true, p.bounded = form == GateForm::bounded;
    p.A_log = values64(A_log), p.dt_bias = values64(dt_bias), p.lower_bound = -5.0;
    p.beta_sigmoid = p.l2norm = true;
    p.h0 = values64(h0);
    p.cu = offsets;
    return oracle::kda(p);
  }
};

struct Out {
  Tensor o, ht;
  explicit Out(const Problem& p)
      : o(DType::f32, {p.B, p.T, p.H, p.V}), ht(DType::f32, {p.N, p.H, p.K, p.V}) {}
};

// Recurrent and chunk (chunk_size C) on one problem: returns the worse of the o / final-state errors.
double chunk_vs_recurrent(const Problem& p, int C) {
  Out r(p), c(p);
  kda_recurrent_fwd(p.args(r.o, r.ht));
  kda_chunk_fwd(p.args(c.o, c.ht), C);
  return std::max(rel_err(values(c.o), values(r.o)), rel_err(values(c.ht), values(r.ht)));
}

TEST(Kda, ChunkMatchesRecurrent) {
  for (int64_t T : {1, 15, 16, 17, 63, 64, 65, 1300}) {
    const Problem p(1, T, 2, 32, 48, {}, uint64_t(T));
    EXPECT_LE(chunk_vs_recurrent(p, 64), 1e-5) << "T=" << T;
  }
  const Problem bounded(2, 65, 2, 32, 32, {}, 3, GateForm::bounded);
  EXPECT_LE(chunk_vs_recurrent(bounded, 64), 1e-5) << "bounded gate";
  const Problem p(1, 130, 2, 24, 16, {}, 5);
  for (int C : {1, 16, 17, 100, 256}) EXPECT_LE(chunk_vs_recurrent(p, C), 1e-5) << "chunk_size=" << C;
}

TEST(Kda, ChunkMatchesRecurrentVarlen) {
  const Problem p(1, 0, 3, 32, 32, {13, 0, 64, 65, 130}, 11);
  EXPECT_LE(chunk_vs_recurrent(p, 64), 1e-5);
  // and both match the fp64 oracle
  Out c(p);
  kda_chunk_fwd(p.args(c.o, c.ht));
  const oracle::KdaResult ref = p.oracle();
  const std::vector<float> ro(ref.o.begin(), ref.o.end()), rh(ref.ht.begin(), ref.ht.end());
  EXPECT_LE(rel_err(values(c.o), ro), 1e-5);
  EXPECT_LE(rel_err(values(c.ht), rh), 1e-5);
}

TEST(Kda, PrefillThenDecodeMatchesPrefill) {
  const int64_t T = 100, n = 5;
  for (bool chunk : {true, false}) {
    const Problem p(2, T, 2, 32, 32, {}, 21);
    Out full(p);
    const KdaArgs fa = p.args(full.o, full.ht);
    chunk ? kda_chunk_fwd(fa) : kda_recurrent_fwd(fa);

    // prefill of T - n tokens, then n single-token recurrent steps on one state buffer (aliased in/out)
    Out part(p);
    KdaArgs a = p.args(part.o, part.ht);
    auto tokens = [](TensorView x, int64_t t0, int64_t t1) { return x.slice(1, t0, t1); };
    a.q = tokens(p.q, 0, T - n), a.k = tokens(p.k, 0, T - n), a.v = tokens(p.v, 0, T - n);
    a.g = tokens(p.f, 0, T - n), a.beta = tokens(p.beta, 0, T - n), a.o = tokens(part.o, 0, T - n);
    chunk ? kda_chunk_fwd(a) : kda_recurrent_fwd(a);
    for (int64_t t = T - n; t < T; ++t) {
      KdaArgs d = p.args(tokens(part.o, t, t + 1), part.ht);
      d.q = tokens(p.q, t, t + 1), d.k = tokens(p.k, t, t + 1), d.v = tokens(p.v, t, t + 1);
      d.g = tokens(p.f, t, t + 1), d.beta = tokens(p.beta, t, t + 1);
      d.initial_state = part.ht;  // final_state aliases initial_state
      kda_recurrent_fwd(d);
    }
    EXPECT_LE(rel_err(values(part.o), values(full.o)), 1e-5) << (chunk ? "chunk" : "recurrent");
    EXPECT_LE(rel_err(values(part.ht), values(full.ht)), 1e-5) << (chunk ? "chunk" : "recurrent");
  }
}

TEST(Kda, GateSweepIsFiniteAndMatchesOracle) {
  // every (f, dt_bias) pair on a 0.5 grid over [-8, 8], A_log at both ends of its range
  const int64_t n = 33, H = 2;
  Tensor f(DType::f32, {n, H, n}), g(DType::f32, {n, H, n}), A_log(DType::f32, {H}),
      dt_bias(DType::f32, {H, n});
  for (int64_t r = 0; r < n; ++r)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < n; ++i) {
        f.data_as<float>()[(r * H + h) * n + i] = -8.f + 0.5f * float(r);
        dt_bias.data_as<float>()[h * n + i] = -8.f + 0.5f * float(i);
      }
  A_log.data_as<float>()[0] = -2.f, A_log.data_as<float>()[1] = 1.f;
  for (GateForm form : {GateForm::softplus, GateForm::bounded}) {
    kda_gate(f, KdaGate{form, A_log, dt_bias, -5.f}, g);
    const std::vector<double> ref = oracle::kda_gate(values64(f), H, n, form == GateForm::bounded,
                                                     values64(A_log), values64(dt_bias), -5.0);
    const std::vector<float> got = values(g);
    for (size_t e = 0; e < got.size(); ++e) {
      ASSERT_TRUE(std::isfinite(got[e]));
      EXPECT_LE(got[e], 0.f);
      EXPECT_NEAR(got[e], ref[e], 1e-5 * std::fabs(ref[e]) + 1e-30) << "element " << e;
    }
  }
  // the fused gate at the extremes: both forms stay finite and match the oracle
  for (GateForm form : {GateForm::softplus, GateForm::bounded}) {
    Problem p(1, 70, 2, 32, 32, {}, 31, form);
    std::mt19937_64 rng(5);
    std::uniform_int_distribution<int> sign(0, 1);
    for (float* x : {p.f.data_as<float>(), p.dt_bias.data_as<float>()}) {
      const int64_t cnt = x == p.f.data_as<float>() ? p.f.numel() : p.dt_bias.numel();
      for (int64_t i = 0; i < cnt; ++i) x[i] = sign(rng) ? 8.f : -8.f;
    }
    const oracle::KdaResult ref = p.oracle();
    const std::vector<float> ro(ref.o.begin(), ref.o.end()), rh(ref.ht.begin(), ref.ht.end());
    for (bool chunk : {false, true}) {
      Out out(p);
      chunk ? kda_chunk_fwd(p.args(out.o, out.ht)) : kda_recurrent_fwd(p.args(out.o, out.ht));
      for (float x : values(out.o)) ASSERT_TRUE(std::isfinite(x));
      EXPECT_LE(rel_err(values(out.o), ro), 1e-5);
      EXPECT_LE(rel_err(values(out.ht), rh), 1e-5);
    }
  }
}

TEST(Kda, StateLayoutsAreTransposes) {
  const Problem p(2, 37, 2, 16, 24, {}, 41);
  // h0 in vk layout = transpose of the kv one
  Tensor h0vk(DType::f32, {p.N, p.H, p.V, p.K});
  for (int64_t m = 0; m < p.N * p.H; ++m)
    for (int64_t i = 0; i < p.K; ++i)
      for (int64_t j = 0; j < p.V; ++j)
        h0vk.data_as<float>()[(m * p.V + j) * p.K + i] = p.h0.data_as<float>()[(m * p.K + i) * p.V + j];
  for (bool chunk : {false, true}) {
    Out kv(p);
    Tensor ovk(DType::f32, {p.B, p.T, p.H, p.V}), htvk(DType::f32, {p.N, p.H, p.V, p.K});
    KdaArgs a = p.args(kv.o, kv.ht), b = p.args(ovk, htvk);
    b.initial_state = h0vk;
    b.state_layout = StateLayout::vk;
    chunk ? kda_chunk_fwd(a) : kda_recurrent_fwd(a);
    chunk ? kda_chunk_fwd(b) : kda_recurrent_fwd(b);
    EXPECT_EQ(values(kv.o), values(ovk));
    bool transposed = true;
    for (int64_t m = 0; m < p.N * p.H; ++m)
      for (int64_t i = 0; i < p.K; ++i)
        for (int64_t j = 0; j < p.V; ++j)
          transposed = transposed && htvk.data_as<float>()[(m * p.V + j) * p.K + i] ==
                                         kv.ht.data_as<float>()[(m * p.K + i) * p.V + j];
    EXPECT_TRUE(transposed);
  }
}

TEST(Kda, FinalStateMayAliasInitialState) {
  const Problem p(1, 0, 2, 16, 16, {20, 0, 33}, 51);
  for (bool chunk : {false, true}) {
    Out ref(p), al(p);
    chunk ? kda_chunk_fwd(p.args(ref.o, ref.ht)) : kda_recurrent_fwd(p.args(ref.o, ref.ht));
    std::memcpy(al.ht.data(), p.h0.data(), al.ht.nbytes());
    KdaArgs a = p.args(al.o, al.ht);
    a.initial_state = al.ht;
    chunk ? kda_chunk_fwd(a) : kda_recurrent_fwd(a);
    EXPECT_EQ(values(al.o), values(ref.o));
    EXPECT_EQ(values(al.ht), values(ref.ht));
  }
}

// state_slots: sequence n reads and writes pool row slots[n] (in place); the other pool rows are untouched;
// o and the states equal an unpooled run on the gathered rows. Both forms, both layouts (pool rows hold
// the layout's bytes, so gathering is layout-blind).
TEST(Kda, StateSlotsIndexAPool) {
  const Problem p(1, 0, 2, 16, 8, {9, 1, 30}, 71);
  const int64_t pool_rows = 5, row = p.H * p.K * p.V;
  const int32_t slot[3] = {4, 0, 2};
  Tensor slots(DType::i32, {3});
  std::memcpy(slots.data(), slot, sizeof slot);
  for (StateLayout layout : {StateLayout::kv, StateLayout::vk}) {
    for (bool chunk : {false, true}) {
      const std::vector<int64_t> pshape = layout == StateLayout::kv ? std::vector<int64_t>{pool_rows, p.H, p.K, p.V}
                                                                    : std::vector<int64_t>{pool_rows, p.H, p.V, p.K};
      Tensor pool(DType::f32, pshape), h0(DType::f32, {p.N, pshape[1], pshape[2], pshape[3]});
      std::mt19937_64 rng(5);
      fill(pool, rng, -1, 1);
      const std::vector<float> before = values(pool);
      for (int64_t n = 0; n < p.N; ++n)
        std::memcpy(h0.data_as<float>() + n * row, pool.data_as<float>() + slot[n] * row, size_t(row) * 4);
      Out ref(p), got(p);
      KdaArgs r = p.args(ref.o, {}), a = p.args(got.o, pool);
      r.state_layout = a.state_layout = layout;
      r.initial_state = h0, r.final_state = h0;  // in place, unpooled
      a.initial_state = pool, a.state_slots = slots;
      chunk ? kda_chunk_fwd(r) : kda_recurrent_fwd(r);
      chunk ? kda_chunk_fwd(a) : kda_recurrent_fwd(a);
      EXPECT_EQ(values(got.o), values(ref.o));
      const std::vector<float> after = values(pool), h = values(h0);
      for (int64_t m = 0; m < pool_rows; ++m) {
        int64_t n = -1;
        for (int64_t i = 0; i < p.N; ++i)
          if (slot[i] == m) n = i;
        for (int64_t e = 0; e < row; ++e) {
          const float want = n < 0 ? before[size_t(m * row + e)] : h[size_t(n * row + e)];
          ASSERT_EQ(after[size_t(m * row + e)], want) << "pool row " << m << " element " << e;
        }
      }
    }
  }
}

TEST(Kda, ZeroLengthSequencesKeepTheirState) {
  const Problem p(1, 0, 2, 8, 8, {0, 5, 0}, 61);
  for (bool chunk : {false, true}) {
    Out out(p);
    chunk ? kda_chunk_fwd(p.args(out.o, out.ht)) : kda_recurrent_fwd(p.args(out.o, out.ht));
    const std::vector<float> h0 = values(p.h0), ht = values(out.ht);
    const size_t slot = size_t(p.H * p.K * p.V);
    for (size_t e = 0; e < slot; ++e) {
      EXPECT_EQ(ht[e], h0[e]);                        // sequence 0
      EXPECT_EQ(ht[2 * slot + e], h0[2 * slot + e]);  // sequence 2
    }
    // no initial state: zeros
    Out z(p);
    std::fill(z.ht.data_as<float>(), z.ht.data_as<float>() + z.ht.numel(), 7.f);
    chunk ? kda_chunk_fwd(p.args(z.o, z.ht, false)) : kda_recurrent_fwd(p.args(z.o, z.ht, false));
    EXPECT_EQ(values(z.ht)[0], 0.f);
    EXPECT_EQ(values(z.ht)[2 * slot + slot - 1], 0.f);
  }
  // T = 0 without cu_seqlens: only the final state is written
  const Problem e(2, 0, 2, 8, 8, {}, 62);
  Out out(e);
  kda_chunk_fwd(e.args(out.o, out.ht));
  EXPECT_EQ(values(out.ht), values(e.h0));
}

TEST(Kda, RejectsBadArguments) {
  const Problem p(1, 0, 2, 8, 8, {3, 4}, 71);  // B = 1, T = 7, H = 2, K = V = 8, N = 2
  Out out(p);
  const KdaArgs good = p.args(out.o, out.ht);
  EXPECT_NO_THROW(kda_recurrent_fwd(good));
  EXPECT_NO_THROW(kda_chunk_fwd(good));

  Tensor k6(DType::f32, {1, 7, 2, 6}), ki(DType::i32, {1, 7, 2, 8}), v9(DType::f32, {1, 7, 2, 9});
  Tensor beta5(DType::f32, {1, 7, 5}), big(DType::f32, {1, 7, 2, 300}), g3(DType::f32, {1, 7, 2});
  Tensor o16(DType::bf16, {1, 6, 2, 8}), h0bad(DType::f32, {3, 2, 8, 8}), h0bf(DType::bf16, {2, 2, 8, 8});
  Tensor wide(DType::f32, {1, 7, 2, 16});
  auto with = [&](auto edit) {
    KdaArgs a = good;
    edit(a);
    return a;
  };
  auto both = [&](const KdaArgs& a, auto... frags) {
    EXPECT_KIMI_ERROR(kda_recurrent_fwd(a), "kda_recurrent_fwd", frags...);
    EXPECT_KIMI_ERROR(kda_chunk_fwd(a), "kda_chunk_fwd", frags...);
  };
  both(with([&](KdaArgs& a) { a.k = k6; }), "'k'", "[1, 7, 2, 8]", "[1, 7, 2, 6]");
  both(with([&](KdaArgs& a) { a.k = ki; }), "'k'", "f32/bf16/f16", "i32");
  both(with([&](KdaArgs& a) { a.q = TensorView{}; }), "'q'", "none");
  both(with([&](KdaArgs& a) { a.q = g3; }), "'q'", "4 dimensions", "3");
  both(with([&](KdaArgs& a) { a.v = v9; }), "'o'", "[1, 7, 2, 9]", "[1, 7, 2, 8]");
  both(with([&](KdaArgs& a) { a.beta = beta5; }), "'beta'", "[1, 7, 2]", "[1, 7, 5]");
  both(with([&](KdaArgs& a) { a.g = g3; }), "'g'", "[1, 7, 2, 8]", "[1, 7, 2]");
  both(with([&](KdaArgs& a) { a.o = o16; }), "'o'", "[1, 7, 2, 8]", "[1, 6, 2, 8]");
  both(with([&](KdaArgs& a) { a.q = big, a.k = big, a.g = big; }), "'q'", "[1, 256]", "300");
  both(with([&](KdaArgs& a) { a.v = big, a.o = big; }), "'v'", "[1, 256]", "300");
  // strides: last dimension must have stride 1; states contiguous
  const std::array<int64_t, 4> qshape{1, 7, 2, 8}, qstrides{224, 32, 16, 2};
  both(with([&](KdaArgs& a) { a.q = TensorView(wide.data(), DType::f32, qshape, qstrides); }), "'q'",
       "stride 1", "stride 2");
  both(with([&](KdaArgs& a) { a.initial_state = TensorView(p.h0).transpose(2, 3); }), "'initial_state'",
       "contiguous");
  // states: shape per layout, dtype, N
  both(with([&](KdaArgs& a) { a.initial_state = h0bad; }), "'initial_state'", "[2, 2, 8, 8]", "[3, 2, 8, 8]");
  both(with([&](KdaArgs& a) { a.final_state = h0bad; }), "'final_state'", "[2, 2, 8, 8]", "[3, 2, 8, 8]");
  both(with([&](KdaArgs& a) { a.initial_state = h0bf; }), "'initial_state'", "f32", "bf16");
  both(with([&](KdaArgs& a) {
         a.final_state = TensorView(static_cast<float*>(p.h0.data()) + 3, DType::f32, {2, 2, 8, 8});
       }),
       "'final_state'", "overlap");
  // state_slots: into a pool of 3 rows (h0bad), distinct, in range, with a state to index
  Tensor sl(DType::i32, {2});
  auto slots_with = [&](int32_t s0, int32_t s1) {
    sl.data_as<int32_t>()[0] = s0, sl.data_as<int32_t>()[1] = s1;
    return with([&](KdaArgs& a) { a.initial_state = h0bad, a.final_state = {}, a.state_slots = sl; });
  };
  both(slots_with(0, 3), "'state_slots'", "[0, 3)", "state_slots[1] = 3");
  both(slots_with(2, 2), "'state_slots'", "distinct", "state_slots[0] = state_slots[1] = 2");
  both(with([&](KdaArgs& a) { a.initial_state = {}, a.final_state = {}, a.state_slots = sl; }), "'state_slots'",
       "absent when neither");
  // cu_seqlens
  Tensor cu(DType::i64, {3});
  auto cu_with = [&](std::initializer_list<int64_t> off) {
    std::copy(off.begin(), off.end(), cu.data_as<int64_t>());
    return with([&](KdaArgs& a) { a.cu_seqlens = cu; });
  };
  both(cu_with({1, 3, 7}), "'cu_seqlens'", "first offset 0", "1");
  both(cu_with({0, 5, 4}), "'cu_seqlens'", "non-decreasing", "offset[2] = 4");
  both(cu_with({0, 3, 6}), "'cu_seqlens'", "last offset = total tokens 7", "6");
  Tensor cuf(DType::f32, {3});
  both(with([&](KdaArgs& a) { a.cu_seqlens = cuf; }), "'cu_seqlens'", "i32/i64", "f32");
  {
    const Problem b2(2, 7, 2, 8, 8, {}, 72);
    Out o2(b2);
    KdaArgs a = b2.args(o2.o, o2.ht);
    a.cu_seqlens = p.cu;
    both(a, "'cu_seqlens'", "batch size 1", "q.shape[0] = 2");
  }
  // fused gate
  Tensor al3(DType::f32, {3}), dt7(DType::f32, {7}), dt2(DType::f32, {2, 9}), albf(DType::bf16, {2});
  both(with([&](KdaArgs& a) { a.gate->A_log = al3; }), "'gate.A_log'", "[2]", "[3]");
  both(with([&](KdaArgs& a) { a.gate->A_log = albf; }), "'gate.A_log'", "f32", "bf16");
  both(with([&](KdaArgs& a) { a.gate->dt_bias = dt7; }), "'gate.dt_bias'", "[16]", "[7]");
  both(with([&](KdaArgs& a) { a.gate->dt_bias = dt2; }), "'gate.dt_bias'", "[2, 8]", "[2, 9]");
  both(with([&](KdaArgs& a) { a.gate->form = GateForm::bounded, a.gate->lower_bound = 1.f; }),
       "'gate.lower_bound'", "<= 0", "1.0");
  both(with([&](KdaArgs& a) { a.scale = NAN; }), "'scale'", "finite", "nan");
  // devices
  TensorView vd = p.v;
  vd.device = Device::cuda(0);
  both(with([&](KdaArgs& a) { a.v = vd; }), "'v'", "device cpu", "cuda:0");
  TensorView hd = p.h0;
  hd.device = Device::cuda(0);
  both(with([&](KdaArgs& a) { a.initial_state = hd; }), "'initial_state'", "device cpu", "cuda:0");
  // chunk size
  EXPECT_KIMI_ERROR(kda_chunk_fwd(good, 0), "kda_chunk_fwd", "'chunk_size'", "[1, 256]", "0");
  EXPECT_KIMI_ERROR(kda_chunk_fwd(good, 257), "kda_chunk_fwd", "'chunk_size'", "[1, 256]", "257");

  // kda_gate / kda_beta
  Tensor f(DType::f32, {4, 2, 8}), g(DType::f32, {4, 2, 8}), g5(DType::f32, {5, 2, 8}), f1(DType::f32, {8});
  const KdaGate gate{GateForm::softplus, p.A_log, p.dt_bias, -5.f};
  EXPECT_NO_THROW(kda_gate(f, gate, g));
  EXPECT_KIMI_ERROR(kda_gate(f, gate, g5), "kda_gate", "'g'", "[4, 2, 8]", "[5, 2, 8]");
  EXPECT_KIMI_ERROR(kda_gate(f1, gate, g), "kda_gate", "'f'", "at least 2 dimensions", "1");
  EXPECT_KIMI_ERROR(kda_gate(f, KdaGate{GateForm::softplus, al3, p.dt_bias, -5.f}, g), "kda_gate",
                    "'gate.A_log'", "[2]", "[3]");
  EXPECT_KIMI_ERROR(kda_gate(f, KdaGate{GateForm::softplus, p.A_log, dt7, -5.f}, g), "kda_gate",
                    "'gate.dt_bias'", "[16]", "[7]");
  Tensor b(DType::f32, {4, 2}), bt(DType::f32, {4, 3}), bi(DType::i32, {4, 2});
  EXPECT_NO_THROW(kda_beta(b, b));
  EXPECT_KIMI_ERROR(kda_beta(b, bt), "kda_beta", "'beta'", "[4, 2]", "[4, 3]");
  EXPECT_KIMI_ERROR(kda_beta(bi, b), "kda_beta", "'b'", "f32/bf16/f16", "i32");
}

}  // namespace
}  // namespace kimi
