// Properties of kimi/ops/mla.h the harness cannot express (prefill == cache write + absorbed decode,
// varlen == per sequence, the gate, the default scale), and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "expect_error.h"
#include "kimi/ops/mla.h"

namespace kimi {
namespace {

// k3-tiny MLA (SPEC 13).
constexpr int64_t H = 4, R = 64, P = 16, Dn = 32, Dv = 32, Dq = Dn + P;

Tensor rnd(std::initializer_list<int64_t> shape, std::mt19937_64& rng, float lo, float hi) {
  Tensor t(DType::f32, shape);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = u(rng);
  return t;
}

Tensor ints(std::initializer_list<int64_t> v, DType dt = DType::i32) {
  Tensor t(dt, {int64_t(v.size())});
  int64_t i = 0;
  for (int64_t x : v) {
    if (dt == DType::i64)
      t.data_as<int64_t>()[i++] = x;
    else
      t.data_as<int32_t>()[i++] = int32_t(x);
  }
  return t;
}

Weight dense(const Tensor& w) { return Weight{w.view(), {}}; }

std::vector<double> values(const TensorView& t) {  // f32 view, any strides, row-major order
  std::vector<double> v;
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0, r = i;
    for (int d = t.ndim - 1; d >= 0; --d) {
      off += (r % t.shape[d]) * t.strides[d];
      r /= t.shape[d];
    }
    v.push_back(static_cast<const float*>(t.data)[off]);
  }
  return v;
}

double rel(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

// [B, T, ...] -> the token-t view [B, ...] (drops dimension 1).
TensorView token(const TensorView& x, int64_t t) {
  TensorView v = x.slice(1, t, t + 1);
  for (int d = 1; d + 1 < v.ndim; ++d) {
    v.shape[d] = v.shape[d + 1];
    v.strides[d] = v.strides[d + 1];
  }
  v.ndim -= 1;
  return v;
}

struct Inputs {
  Tensor q, latent, k_pe, w, gate;
  Inputs(int64_t B, int64_t T, uint64_t seed) {
    std::mt19937_64 rng(seed);
    q = rnd({B, T, H, Dq}, rng, -2, 2);
    latent = rnd({B, T, R}, rng, -1.7f, 1.7f);
    k_pe = rnd({B, T, P}, rng, -1.5f, 1.5f);
    const float a = std::sqrt(3.f / R);
    w = rnd({H * (Dn + Dv), R}, rng, -a, a);
    gate = rnd({B, T, H * Dv}, rng, -4, 4);
  }
};

TEST(Mla, PrefillEqualsCacheWriteThenAbsorbedDecode) {
  const int64_t B = 2, T = 13, L = 16, Nc = 3, split = 8;
  Inputs in(B, T, 1);
  Tensor o(DType::f32, {B, T, H, Dv});
  mla_prefill(in.q, in.latent, in.k_pe, dense(in.w), in.gate, {}, std::nullopt, o);

  // The cache filled in two steps (strided views of the inputs), sequences in rows 2 and 0.
  Tensor cache(DType::f32, {Nc, L, R + P}), slots = ints({2, 0});
  Tensor start0 = ints({0, 0}), start1 = ints({split, split});
  mla_cache_write(in.latent.view().slice(1, 0, split), in.k_pe.view().slice(1, 0, split), cache, start0, slots);
  mla_cache_write(in.latent.view().slice(1, split, T), in.k_pe.view().slice(1, split, T), cache, start1, slots);

  std::vector<double> dec, pre;
  for (int64_t t = 0; t < T; ++t) {
    Tensor ot(DType::f32, {B, H, Dv}), lens = ints({t + 1, t + 1});
    mla_decode(token(in.q, t), cache, lens, slots, dense(in.w), token(in.gate, t), std::nullopt, ot);
    const auto d = values(ot), p = values(token(o, t));
    dec.insert(dec.end(), d.begin(), d.end());
    pre.insert(pre.end(), p.begin(), p.end());
  }
  EXPECT_LE(rel(dec, pre), 1e-5);
  double norm = 0;
  for (double v : pre) norm += v * v;
  EXPECT_GT(std::sqrt(norm / double(pre.size())), 0.05);  // a real, nonzero output (RMS)
}

TEST(Mla, VarlenEqualsPerSequencePrefill) {
  const std::vector<int64_t> lens{7, 1, 0, 19, 66};
  int64_t T = 0;
  for (int64_t l : lens) T += l;
  Inputs in(1, T, 2);
  Tensor o(DType::f32, {1, T, H, Dv}), cu = ints({0, 7, 8, 8, 27, 93}, DType::i64);
  mla_prefill(in.q, in.latent, in.k_pe, dense(in.w), in.gate, cu, std::nullopt, o);
  int64_t t0 = 0;
  for (int64_t len : lens) {
    if (len == 0) continue;
    Tensor os(DType::f32, {1, len, H, Dv});
    auto s = [&](const Tensor& x) { return x.view().slice(1, t0, t0 + len); };
    mla_prefill(s(in.q), s(in.latent), s(in.k_pe), dense(in.w), s(in.gate), {}, std::nullopt, os, Context{nullptr, 1});
    EXPECT_LE(rel(values(os), values(s(o))), 1e-6) << "sequence at " << t0;
    t0 += len;
  }
}

TEST(Mla, GateMultipliesBySigmoid) {
  const int64_t B = 2, T = 9;
  Inputs in(B, T, 3);
  Tensor og(DType::f32, {B, T, H, Dv}), o(DType::f32, {B, T, H, Dv});
  mla_prefill(in.q, in.latent, in.k_pe, dense(in.w), in.gate, {}, std::nullopt, og);
  mla_prefill(in.q, in.latent, in.k_pe, dense(in.w), {}, {}, std::nullopt, o);
  auto want = values(o);
  const auto g = values(in.gate);  // [B, T, H*Dv] has the layout of o
  for (size_t i = 0; i < want.size(); ++i) want[i] /= 1.0 + std::exp(-g[i]);
  EXPECT_LE(rel(values(og), want), 1e-6);

  Tensor cache(DType::f32, {B, T, R + P}), lens = ints({T, 4});
  mla_cache_write(in.latent, in.k_pe, cache, ints({0, 0}), {});
  Tensor dg(DType::f32, {B, H, Dv}), d(DType::f32, {B, H, Dv});
  mla_decode(token(in.q, 3), cache, lens, {}, dense(in.w), token(in.gate, 3), std::nullopt, dg);
  mla_decode(token(in.q, 3), cache, lens, {}, dense(in.w), {}, std::nullopt, d);
  want = values(d);
  const auto gd = values(token(in.gate, 3));
  for (size_t i = 0; i < want.size(); ++i) want[i] /= 1.0 + std::exp(-gd[i]);
  EXPECT_LE(rel(values(dg), want), 1e-6);
}

TEST(Mla, DefaultScaleIsInverseSqrtOfQkDim) {
  Inputs in(1, 10, 4);
  Tensor a(DType::f32, {1, 10, H, Dv}), b(DType::f32, {1, 10, H, Dv}), c(DType::f32, {1, 10, H, Dv});
  mla_prefill(in.q, in.latent, in.k_pe, dense(in.w), {}, {}, std::nullopt, a);
  mla_prefill(in.q, in.latent, in.k_pe, dense(in.w), {}, {}, float(1.0 / std::sqrt(double(Dq))), b);
  mla_prefill(in.q, in.latent, in.k_pe, dense(in.w), {}, {}, 0.5f, c);
  EXPECT_LE(rel(values(a), values(b)), 1e-7);
  EXPECT_GT(rel(values(c), values(b)), 1e-3);
}

TEST(Mla, PrefillRejectsBadArguments) {
  const int64_t B = 2, T = 5;
  Inputs in(B, T, 5);
  Tensor o(DType::f32, {B, T, H, Dv});
  const Weight w = dense(in.w);
  Tensor lat4(DType::f32, {B, 4, R}), lat48(DType::f32, {B, T, 48}), kpe100(DType::f32, {B, T, 100});
  Tensor o16(DType::f32, {B, T, H, 16}), o3(DType::f32, {B, T, 3, Dv}), g64(DType::f32, {B, T, 64});
  EXPECT_KIMI_ERROR(mla_prefill(in.latent, in.latent, in.k_pe, w, {}, {}, {}, o), "mla_prefill", "'q'", "4 dimensions", "3");
  EXPECT_KIMI_ERROR(mla_prefill(in.q, lat4, in.k_pe, w, {}, {}, {}, o), "mla_prefill", "'latent'", "[2, 5, ?]", "[2, 4, 64]");
  // R from latent inconsistent with w_kvb columns.
  EXPECT_KIMI_ERROR(mla_prefill(in.q, lat48, in.k_pe, w, {}, {}, {}, o), "'w_kvb.w'", "[256, 48]", "[256, 64]", "R = 48");
  // P from k_pe leaves no room for Dn in q.
  EXPECT_KIMI_ERROR(mla_prefill(in.q, in.latent, kpe100, w, {}, {}, {}, o), "'q'", "Dn+P > P = 100", "got 48");
  // Dv from o inconsistent with w_kvb rows.
  EXPECT_KIMI_ERROR(mla_prefill(in.q, in.latent, in.k_pe, w, {}, {}, {}, o16), "'w_kvb.w'", "[192, 64]", "[256, 64]",
                    "Dv = 16");
  EXPECT_KIMI_ERROR(mla_prefill(in.q, in.latent, in.k_pe, w, {}, {}, {}, o3), "'o'", "[2, 5, 4, ?]", "[2, 5, 3, 32]");
  EXPECT_KIMI_ERROR(mla_prefill(in.q, in.latent, in.k_pe, w, g64, {}, {}, o), "'gate'", "[2, 5, 128]", "[2, 5, 64]");
  EXPECT_KIMI_ERROR(mla_prefill(in.q, in.latent, in.k_pe, w, {}, ints({0, 5}), {}, o), "'q'", "B = 1", "got 2");
  Inputs one(1, T, 6);
  Tensor o1(DType::f32, {1, T, H, Dv});
  auto packed = [&](const Tensor& cu) { mla_prefill(one.q, one.latent, one.k_pe, dense(one.w), {}, cu, {}, o1); };
  EXPECT_KIMI_ERROR(packed(ints({0, 2, 4})), "'cu_seqlens'", "last offset = total tokens 5", "got 4");
  EXPECT_KIMI_ERROR(packed(ints({0, 3, 2, 5})), "'cu_seqlens'", "non-decreasing", "offset[2] = 2");
  EXPECT_KIMI_ERROR(packed(ints({1, 5})), "'cu_seqlens'", "first offset 0", "got 1");
  EXPECT_KIMI_ERROR(packed(Tensor(DType::f32, {2})), "'cu_seqlens'", "i32/i64", "f32");
  Tensor packed_w(DType::u8, {256, 32}), scale(DType::u8, {256, 2});
  EXPECT_KIMI_ERROR(mla_prefill(in.q, in.latent, in.k_pe, Weight{packed_w, scale}, {}, {}, {}, o), "'w_kvb'", "dense",
                    "MXFP4");
  EXPECT_KIMI_ERROR(mla_prefill(in.q, in.latent, in.k_pe, w, {}, {}, std::nanf(""), o), "'softmax_scale'", "finite");
  EXPECT_KIMI_ERROR(mla_prefill(in.q.view().transpose(2, 3), in.latent, in.k_pe, w, {}, {}, {}, o), "'q'", "stride 1");
  TensorView og = o.view();
  og.device = Device::cuda(0);
  EXPECT_KIMI_ERROR(mla_prefill(in.q, in.latent, in.k_pe, w, {}, {}, {}, og), "'o'", "cuda:0", "cpu");
}

TEST(Mla, CacheWriteRejectsBadArguments) {
  const int64_t N = 2, T = 5, L = 16, Nc = 3;
  Inputs in(N, T, 7);
  Tensor cache(DType::f32, {Nc, L, R + P}), cache81(DType::f32, {Nc, L, R + P + 1}), cache1(DType::f32, {1, L, R + P});
  Tensor s0 = ints({0, 0});
  Tensor kpe4(DType::f32, {N, 4, P});
  EXPECT_KIMI_ERROR(mla_cache_write(in.latent, kpe4, cache, s0, {}), "mla_cache_write", "'k_pe'", "[2, 5, ?]", "[2, 4, 16]");
  EXPECT_KIMI_ERROR(mla_cache_write(in.latent, in.k_pe, cache81, s0, {}), "mla_cache_write", "'cache'",
                    "R+P = 64+16 = 80", "[3, 16, 81]");
  EXPECT_KIMI_ERROR(mla_cache_write(in.latent, in.k_pe, cache, ints({0, 12}), {}), "'start'",
                    "start[n] + T <= L = 16 (T = 5)", "start[1] = 12");
  EXPECT_KIMI_ERROR(mla_cache_write(in.latent, in.k_pe, cache, ints({-1, 0}), {}), "'start'", "0 <= start[n]",
                    "start[0] = -1");
  EXPECT_KIMI_ERROR(mla_cache_write(in.latent, in.k_pe, cache, ints({0, 0, 0}), {}), "'start'", "[2]", "[3]");
  EXPECT_KIMI_ERROR(mla_cache_write(in.latent, in.k_pe, cache, Tensor(DType::f32, {2}), {}), "'start'", "i32/i64", "f32");
  EXPECT_KIMI_ERROR(mla_cache_write(in.latent, in.k_pe, cache, s0, ints({0, 3})), "'slots'", "[0, 3)", "slots[1] = 3");
  EXPECT_KIMI_ERROR(mla_cache_write(in.latent, in.k_pe, cache, s0, ints({-2, 0})), "'slots'", "[0, 3)", "slots[0] = -2");
  EXPECT_KIMI_ERROR(mla_cache_write(in.latent, in.k_pe, cache, s0, ints({2, 2})), "'slots'", "distinct",
                    "slots[0] = slots[1] = 2");
  EXPECT_KIMI_ERROR(mla_cache_write(in.latent, in.k_pe, cache1, s0, {}), "'cache'", "at least N = 2 rows", "shape[0] = 1");
  TensorView sg = s0.view();
  sg.device = Device::cuda(0);
  EXPECT_KIMI_ERROR(mla_cache_write(in.latent, in.k_pe, cache, sg, {}), "'start'", "host", "cuda:0");
  // Nothing was written by any rejected call.
  for (int64_t i = 0; i < cache.numel(); ++i) ASSERT_EQ(cache.data_as<float>()[i], 0.f);
}

TEST(Mla, DecodeRejectsBadArguments) {
  const int64_t N = 2, L = 16, Nc = 3;
  std::mt19937_64 rng(8);
  Tensor q = rnd({N, H, Dq}, rng, -1, 1), cache = rnd({Nc, L, R + P}, rng, -1, 1), w = rnd({H * (Dn + Dv), R}, rng, -1, 1);
  Tensor o(DType::f32, {N, H, Dv}), lens = ints({16, 3});
  Tensor cache81(DType::f32, {Nc, L, R + P + 1}), w100(DType::f32, {H * (Dn + Dv), 100}), o16(DType::f32, {N, H, 16});
  Tensor o3(DType::f32, {N, 3, Dv}), g(DType::f32, {N, 64}), q3(DType::f32, {N, H, 3});
  const Weight wd = dense(w);
  EXPECT_KIMI_ERROR(mla_decode(q, cache, ints({0, 3}), {}, wd, {}, {}, o), "mla_decode", "'lens'", "[1, 16]", "lens[0] = 0");
  EXPECT_KIMI_ERROR(mla_decode(q, cache, ints({16, 17}), {}, wd, {}, {}, o), "'lens'", "[1, 16]", "lens[1] = 17");
  EXPECT_KIMI_ERROR(mla_decode(q, cache, ints({1, 2, 3}), {}, wd, {}, {}, o), "'lens'", "[2]", "[3]");
  EXPECT_KIMI_ERROR(mla_decode(q, cache, lens, ints({1, 3}), wd, {}, {}, o), "'slots'", "[0, 3)", "slots[1] = 3");
  // P = cache.size(-1) - R = 17 makes Dn = 31: w_kvb rows no longer H*(Dn+Dv).
  EXPECT_KIMI_ERROR(mla_decode(q, cache81, lens, {}, wd, {}, {}, o), "'w_kvb.w'", "[252, 64]", "[256, 64]", "P = 17");
  // R from w_kvb wider than the cache rows.
  EXPECT_KIMI_ERROR(mla_decode(q, cache, lens, {}, dense(w100), {}, {}, o), "'cache'", "R+P >= R = 100", "[3, 16, 80]");
  EXPECT_KIMI_ERROR(mla_decode(q3, cache, lens, {}, wd, {}, {}, o), "'q'", "Dn+P > P = 16", "got 3");
  EXPECT_KIMI_ERROR(mla_decode(q, cache, lens, {}, wd, {}, {}, o16), "'w_kvb.w'", "[192, 64]", "[256, 64]", "Dv = 16");
  EXPECT_KIMI_ERROR(mla_decode(q, cache, lens, {}, wd, {}, {}, o3), "'o'", "[2, 4, ?]", "[2, 3, 32]");
  EXPECT_KIMI_ERROR(mla_decode(q, cache, lens, {}, wd, g, {}, o), "'gate'", "[2, 128]", "[2, 64]");
  EXPECT_KIMI_ERROR(mla_decode(q, cache.view().slice(0, 0, 1), lens, {}, wd, {}, {}, o), "'cache'", "at least N = 2",
                    "shape[0] = 1");
  TensorView lg = lens.view();
  lg.device = Device::cuda(0);
  EXPECT_KIMI_ERROR(mla_decode(q, cache, lg, {}, wd, {}, {}, o), "'lens'", "host", "cuda:0");
  EXPECT_KIMI_ERROR(mla_decode(q, cache, lens, {}, wd, {}, std::nanf(""), o), "'softmax_scale'", "finite");
  for (int64_t i = 0; i < o.numel(); ++i) ASSERT_EQ(o.data_as<float>()[i], 0.f);
}

TEST(Mla, EmptyInputsAreANoOp) {
  std::mt19937_64 rng(9);
  Tensor q(DType::f32, {1, 0, H, Dq}), lat(DType::f32, {1, 0, R}), kpe(DType::f32, {1, 0, P}), o(DType::f32, {1, 0, H, Dv});
  Tensor w = rnd({H * (Dn + Dv), R}, rng, -1, 1);
  EXPECT_NO_THROW(mla_prefill(q, lat, kpe, dense(w), {}, {}, std::nullopt, o));
}

}  // namespace
}  // namespace kimi
