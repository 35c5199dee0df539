// Properties and bad-input tests for kimi/ops/conv.h (values against the oracle are in the harness).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "expect_error.h"
#include "kimi/ops/conv.h"

namespace kimi {
namespace {

constexpr auto kSilu = ConvActivation::silu;

Tensor random(DType dt, std::initializer_list<int64_t> shape, uint64_t seed, float lo = -2.f, float hi = 2.f) {
  Tensor t(dt, shape);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) store_from_f32(t.data(), dt, i, dist(rng));
  return t;
}

Tensor copy_of(const Tensor& src) {
  Tensor t(src.view().dtype, std::span<const int64_t>(src.view().shape.data(), size_t(src.view().ndim)));
  std::memcpy(t.data(), src.data(), src.nbytes());
  return t;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// Token t of batch row b as a [1, C] view of x [B, T, C].
TensorView token(const Tensor& x, int64_t b, int64_t t) {
  const TensorView v = x.view();
  return TensorView(v.at({b, t, 0}), v.dtype, {1, v.shape[2]});
}

// prefill(T) == prefill(T-n) followed by n decode steps, for y and the cache, bit for bit (both
// paths run the same fp32 code; the cache holds x's dtype, so the hand-off is exact).
TEST(Conv, PrefillThenDecodeMatchesFullPrefill) {
  const int64_t C = 70;  // two channel blocks, the second partial
  for (DType dt : {DType::f32, DType::bf16}) {
    for (int64_t W : {4, 3, 2}) {
      for (bool with_cache_in : {false, true}) {
        for (int64_t T : {1, 2, 3, 4, 17}) {
          for (int64_t n : {1, 2, 3, 5}) {
            if (n > T) continue;
            SCOPED_TRACE(std::string(dtype_name(dt)) + " W=" + std::to_string(W) + " T=" + std::to_string(T) +
                         " n=" + std::to_string(n) + (with_cache_in ? " cache_in" : ""));
            const int64_t B = 1, H = W - 1;
            const Tensor x = random(dt, {B, T, C}, uint64_t(T * 10 + n));
            const Tensor w = random(DType::f32, {C, 1, W}, 7, -0.6f, 0.6f);
            const Tensor cin = random(dt, {B, C, H}, 9);
            const TensorView cin_v = with_cache_in ? cin.view() : TensorView{};

            Tensor y_full(dt, {B, T, C}), cache_full(dt, {B, C, H});
            short_conv_fwd(x, w, cin_v, cache_full, {}, {}, kSilu, y_full);

            Tensor y_split(dt, {B, T, C}), cache(dt, {B, C, H});
            short_conv_fwd(x.view().slice(1, 0, T - n), w, cin_v, cache, {}, {}, kSilu,
                           y_split.view().slice(1, 0, T - n));
            for (int64_t t = T - n; t < T; ++t) short_conv_update(token(x, 0, t), w, cache, {}, kSilu, token(y_split, 0, t));
            EXPECT_TRUE(same_bytes(y_full, y_split));
            EXPECT_TRUE(same_bytes(cache_full, cache));
          }
        }
      }
    }
  }
}

// A packed varlen batch gives what each sequence gives alone (sequences shorter than W-1, and
// empty ones, included).
TEST(Conv, VarlenEqualsPerSequence) {
  const int64_t C = 70, W = 4, H = 3;
  const std::vector<int64_t> lens = {3, 0, 1, 17, 260, 2};
  const int64_t N = int64_t(lens.size());
  std::vector<int32_t> off = {0};
  for (int64_t l : lens) off.push_back(off.back() + int32_t(l));
  const int64_t total = off.back();
  Tensor cu(DType::i32, {N + 1});
  std::memcpy(cu.data(), off.data(), off.size() * sizeof(int32_t));
  for (DType dt : {DType::f32, DType::bf16}) {
    const Tensor x = random(dt, {1, total, C}, 3), w = random(dt, {C, W}, 4, -0.6f, 0.6f);
    const Tensor cin = random(DType::f32, {N, C, H}, 5);
    Tensor y(dt, {1, total, C}), cout(DType::f32, {N, C, H});
    short_conv_fwd(x, w, cin, cout, cu, {}, kSilu, y);
    Tensor y1(dt, {1, total, C}), cout1(DType::f32, {N, C, H});
    for (int64_t s = 0; s < N; ++s) {
      short_conv_fwd(x.view().slice(1, off[size_t(s)], off[size_t(s) + 1]), w, cin.view().slice(0, s, s + 1),
                     cout1.view().slice(0, s, s + 1), {}, {}, kSilu, y1.view().slice(1, off[size_t(s)], off[size_t(s) + 1]));
    }
    EXPECT_TRUE(same_bytes(y, y1));
    EXPECT_TRUE(same_bytes(cout, cout1));
    // The empty sequence hands its cache through unchanged.
    EXPECT_EQ(std::memcmp(cout.view().at({1, 0, 0}), cin.view().at({1, 0, 0}), size_t(C * H) * 4), 0);
  }
}

// cache_out = cache_in (in place) gives what separate buffers give, also for sequences shorter than W-1.
TEST(Conv, CacheAliasing) {
  const int64_t C = 33, W = 4, H = 3;
  Tensor cu(DType::i64, {4});
  const int64_t off[4] = {0, 1, 3, 9};
  std::memcpy(cu.data(), off, sizeof(off));
  const Tensor x = random(DType::bf16, {1, 9, C}, 1), w = random(DType::f32, {C, 1, W}, 2, -0.6f, 0.6f);
  const Tensor cin = random(DType::bf16, {3, C, H}, 3);
  Tensor y(DType::bf16, {1, 9, C}), cout(DType::bf16, {3, C, H});
  short_conv_fwd(x, w, cin, cout, cu, {}, kSilu, y);
  Tensor cache = copy_of(cin), y2(DType::bf16, {1, 9, C});
  short_conv_fwd(x, w, cache, cache, cu, {}, kSilu, y2);
  EXPECT_TRUE(same_bytes(y, y2));
  EXPECT_TRUE(same_bytes(cout, cache));
}

// The result does not depend on the thread count (tasks never share an output element).
TEST(Conv, ThreadCountDoesNotChangeResult) {
  const int64_t C = 300, W = 4, H = 3, T = 300;
  const Tensor x = random(DType::f32, {2, T, C}, 1), w = random(DType::f32, {C, W}, 2, -0.6f, 0.6f);
  const Tensor cin = random(DType::f32, {2, C, H}, 3);
  Tensor y1(DType::f32, {2, T, C}), c1 = copy_of(cin), y3(DType::f32, {2, T, C}), c3 = copy_of(cin);
  Context one, three;
  one.cpu_threads = 1;
  three.cpu_threads = 3;
  short_conv_fwd(x, w, c1, c1, {}, {}, kSilu, y1, one);
  short_conv_fwd(x, w, c3, c3, {}, {}, kSilu, y3, three);
  EXPECT_TRUE(same_bytes(y1, y3));
  EXPECT_TRUE(same_bytes(c1, c3));
}

// Zero-length sequences: cache_out = cache_in, or zeros without cache_in (cache_out is overwritten).
TEST(Conv, ZeroLengthSequences) {
  const int64_t C = 5, W = 4, H = 3;
  const Tensor x(DType::f32, {2, 0, C}), w = random(DType::f32, {C, W}, 1);
  Tensor y(DType::f32, {2, 0, C});
  const Tensor cin = random(DType::f32, {2, C, H}, 2);
  Tensor cout = random(DType::f32, {2, C, H}, 3);
  short_conv_fwd(x, w, cin, cout, {}, {}, kSilu, y);
  EXPECT_TRUE(same_bytes(cout, cin));
  short_conv_fwd(x, w, {}, cout, {}, {}, kSilu, y);
  for (int64_t i = 0; i < cout.numel(); ++i) EXPECT_EQ(cout.data_as<float>()[i], 0.f);
}

// The oldest input leaves the cache first: after one token the cache is (c1, c2, x).
TEST(Conv, CacheLayoutOldestFirst) {
  const int64_t C = 1, W = 4;
  Tensor x(DType::f32, {1, 1}), y(DType::f32, {1, 1}), w(DType::f32, {C, W}), cache(DType::f32, {1, C, 3});
  const float taps[4] = {1000.f, 100.f, 10.f, 1.f}, c0[3] = {1.f, 2.f, 3.f};
  std::memcpy(w.data(), taps, sizeof(taps));
  std::memcpy(cache.data(), c0, sizeof(c0));
  x.data_as<float>()[0] = 4.f;
  short_conv_update(x, w, cache, {}, ConvActivation::none, y);
  EXPECT_EQ(y.data_as<float>()[0], 1234.f);  // w[c, W-1] multiplies the current token
  EXPECT_EQ(cache.data_as<float>()[0], 2.f);
  EXPECT_EQ(cache.data_as<float>()[1], 3.f);
  EXPECT_EQ(cache.data_as<float>()[2], 4.f);
}

// cache_slots: row n reads and writes cache row slots[n]; other rows are untouched.
TEST(Conv, CacheSlots) {
  const int64_t N = 3, Nc = 6, C = 70, W = 4, H = 3;
  const int32_t slots[3] = {4, 0, 2};
  Tensor sl(DType::i32, {N});
  std::memcpy(sl.data(), slots, sizeof(slots));
  const Tensor x = random(DType::f16, {N, C}, 1), w = random(DType::f16, {C, W}, 2, -0.6f, 0.6f);
  const Tensor pool0 = random(DType::f16, {Nc, C, H}, 3);
  Tensor pool = copy_of(pool0), y(DType::f16, {N, C});
  short_conv_update(x, w, pool, sl, kSilu, y);
  Tensor gathered(DType::f16, {N, C, H}), y2(DType::f16, {N, C});
  const size_t row = size_t(C * H) * 2;
  for (int64_t n = 0; n < N; ++n) std::memcpy(gathered.view().at({n, 0, 0}), pool0.view().at({slots[n], 0, 0}), row);
  short_conv_update(x, w, gathered, {}, kSilu, y2);
  EXPECT_TRUE(same_bytes(y, y2));
  for (int64_t r = 0; r < Nc; ++r) {
    const void* want = pool0.view().at({r, 0, 0});
    for (int64_t n = 0; n < N; ++n)
      if (slots[n] == r) want = gathered.view().at({n, 0, 0});
    EXPECT_EQ(std::memcmp(pool.view().at({r, 0, 0}), want, row), 0) << "cache row " << r;
  }
}

// W = 1: no history, no cache needed; y = act(w * x).
TEST(Conv, WidthOne) {
  const Tensor x = random(DType::f32, {2, 3}, 1), w = random(DType::f32, {3, 1}, 2);
  Tensor y(DType::f32, {2, 3});
  short_conv_update(x, w, {}, {}, ConvActivation::none, y);
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(y.data_as<float>()[i], w.data_as<float>()[i % 3] * x.data_as<float>()[i]);
}

TEST(Conv, FwdRejectsBadArguments) {
  const int64_t B = 2, T = 5, C = 8;
  Tensor x(DType::f32, {B, T, C}), y(DType::f32, {B, T, C}), w(DType::f32, {C, 4}), cache(DType::f32, {B, C, 3});
  Tensor x2(DType::f32, {T, C}), xi(DType::i32, {B, T, C}), y9(DType::f32, {B, T, 9});
  Tensor w9(DType::f32, {9, 4}), wmid(DType::f32, {C, 2, 4}), wwide(DType::f32, {C, 9}), w0(DType::f32, {C, 0});
  Tensor cache4(DType::f32, {B, C, 4}), cache3n(DType::f32, {3, C, 3}), cachei(DType::i32, {B, C, 3});
  EXPECT_KIMI_ERROR(short_conv_fwd(x2, w, {}, {}, {}, {}, kSilu, y), "short_conv_fwd", "'x'", "3 dimensions", "2");
  EXPECT_KIMI_ERROR(short_conv_fwd(xi, w, {}, {}, {}, {}, kSilu, y), "'x'", "f32/bf16/f16", "i32");
  EXPECT_KIMI_ERROR(short_conv_fwd(x.view().transpose(1, 2), w, {}, {}, {}, {}, kSilu, y), "'x'", "stride 1");
  EXPECT_KIMI_ERROR(short_conv_fwd(x, w, {}, {}, {}, {}, kSilu, y9), "'y'", "[2, 5, 8]", "[2, 5, 9]");
  EXPECT_KIMI_ERROR(short_conv_fwd(x, w9, {}, {}, {}, {}, kSilu, y), "'w'", "[8, ?]", "[9, 4]");
  EXPECT_KIMI_ERROR(short_conv_fwd(x, wmid, {}, {}, {}, {}, kSilu, y), "'w'", "[8, 1, ?]", "[8, 2, 4]");
  EXPECT_KIMI_ERROR(short_conv_fwd(x, wwide, {}, {}, {}, {}, kSilu, y), "'w'", "[1, 8]", "9");
  EXPECT_KIMI_ERROR(short_conv_fwd(x, w0, {}, {}, {}, {}, kSilu, y), "'w'", "[1, 8]", "0");
  EXPECT_KIMI_ERROR(short_conv_fwd(x, Tensor(DType::f32, {C}), {}, {}, {}, {}, kSilu, y), "'w'", "[C, W]", "1");
  EXPECT_KIMI_ERROR(short_conv_fwd(x, w, cache4, {}, {}, {}, kSilu, y), "'cache_in'", "[2, 8, 3]", "[2, 8, 4]");
  EXPECT_KIMI_ERROR(short_conv_fwd(x, w, {}, cache3n, {}, {}, kSilu, y), "'cache_out'", "[2, 8, 3]", "[3, 8, 3]");
  EXPECT_KIMI_ERROR(short_conv_fwd(x, w, cachei, {}, {}, {}, kSilu, y), "'cache_in'", "f32/bf16/f16", "i32");
  EXPECT_KIMI_ERROR(short_conv_fwd(x, w, {}, {}, {}, {}, static_cast<ConvActivation>(7), y), "'act'", "silu", "7");
  // cache_out sharing cache_in's memory must be the same view.
  TensorView cache_bf = cache.view();
  cache_bf.dtype = DType::bf16;
  EXPECT_KIMI_ERROR(short_conv_fwd(x, w, cache, cache_bf, {}, {}, kSilu, y), "'cache_out'", "exactly the view 'cache_in'",
                    "bf16");
  TensorView x_bf = x.view();
  x_bf.dtype = DType::bf16;
  EXPECT_KIMI_ERROR(short_conv_fwd(x, w, {}, {}, {}, {}, kSilu, x_bf), "'y'", "disjoint from 'x'", "disjoint from 'x'");
  EXPECT_KIMI_ERROR(short_conv_fwd(x, w, {}, {}, {}, {}, kSilu, x), "'y'", "not in place");
  // cache_slots: distinct rows of the cache pools, in range, with a cache to index
  Tensor pool(DType::f32, {4, C, 3}), sl(DType::i64, {B});
  sl.data_as<int64_t>()[0] = 3, sl.data_as<int64_t>()[1] = 4;
  EXPECT_KIMI_ERROR(short_conv_fwd(x, w, pool, pool, {}, sl, kSilu, y), "'cache_slots'", "[0, 4)", "cache_slots[1] = 4");
  sl.data_as<int64_t>()[1] = 3;
  EXPECT_KIMI_ERROR(short_conv_fwd(x, w, pool, pool, {}, sl, kSilu, y), "'cache_slots'", "distinct",
                    "cache_slots[0] = cache_slots[1] = 3");
  EXPECT_KIMI_ERROR(short_conv_fwd(x, w, {}, {}, {}, sl, kSilu, y), "'cache_slots'", "absent when neither");
  Tensor pool3(DType::f32, {3, C, 3});
  sl.data_as<int64_t>()[1] = 0;
  EXPECT_KIMI_ERROR(short_conv_fwd(x, w, pool, pool3, {}, sl, kSilu, y), "'cache_out'", "[4, 8, 3]", "[3, 8, 3]");
  TensorView xg = x.view(), yg = y.view();
  xg.device = yg.device = Device::cuda(0);
  EXPECT_KIMI_ERROR(short_conv_fwd(xg, w, {}, {}, {}, {}, kSilu, yg), "'w'", "cuda:0", "cpu");
}

TEST(Conv, FwdRejectsBadCuSeqlens) {
  const int64_t C = 8;
  Tensor x(DType::f32, {1, 6, C}), y(DType::f32, {1, 6, C}), w(DType::f32, {C, 1, 4});
  Tensor xb(DType::f32, {2, 3, C}), yb(DType::f32, {2, 3, C});
  auto cu = [](std::vector<int32_t> v) {
    Tensor t(DType::i32, {int64_t(v.size())});
    std::memcpy(t.data(), v.data(), v.size() * 4);
    return t;
  };
  const Tensor good = cu({0, 2, 6}), short_total = cu({0, 2, 5}), decreasing = cu({0, 4, 3, 6}), nonzero = cu({1, 6});
  Tensor cuf(DType::f32, {3}), cache2(DType::f32, {2, C, 3}), cache3(DType::f32, {3, C, 3});
  EXPECT_KIMI_ERROR(short_conv_fwd(xb, w, {}, {}, good, {}, kSilu, yb), "short_conv_fwd", "'x'", "batch 1", "batch 2");
  EXPECT_KIMI_ERROR(short_conv_fwd(x, w, {}, {}, short_total, {}, kSilu, y), "'cu_seqlens'", "last offset", "6", "5");
  EXPECT_KIMI_ERROR(short_conv_fwd(x, w, {}, {}, decreasing, {}, kSilu, y), "'cu_seqlens'", "non-decreasing");
  EXPECT_KIMI_ERROR(short_conv_fwd(x, w, {}, {}, nonzero, {}, kSilu, y), "'cu_seqlens'", "first offset 0", "1");
  EXPECT_KIMI_ERROR(short_conv_fwd(x, w, {}, {}, cuf, {}, kSilu, y), "'cu_seqlens'", "i32/i64", "f32");
  // N comes from cu_seqlens: two sequences need a [2, C, 3] cache.
  EXPECT_KIMI_ERROR(short_conv_fwd(x, w, cache3, {}, good, {}, kSilu, y), "'cache_in'", "[2, 8, 3]", "[3, 8, 3]");
  EXPECT_NO_THROW(short_conv_fwd(x, w, cache2, cache2, good, {}, kSilu, y));
}

TEST(Conv, UpdateRejectsBadArguments) {
  const int64_t N = 3, C = 8;
  Tensor x = random(DType::f32, {N, C}, 1), y(DType::f32, {N, C}), w(DType::f32, {C, 1, 4});
  Tensor cache(DType::f32, {N, C, 3}), pool(DType::f32, {6, C, 3}), cache2(DType::f32, {N, C, 2});
  Tensor x3(DType::f32, {1, N, C}), y4(DType::f32, {4, C}), wbig(DType::f32, {C, 1, 12});
  auto slots = [](std::vector<int32_t> v) {
    Tensor t(DType::i32, {int64_t(v.size())});
    std::memcpy(t.data(), v.data(), v.size() * 4);
    return t;
  };
  const Tensor out_of_range = slots({0, 6, 1}), negative = slots({0, -1, 1}), dup = slots({2, 0, 2}), two = slots({0, 1});
  Tensor slotsf(DType::f32, {N});
  EXPECT_KIMI_ERROR(short_conv_update(x3, w, cache, {}, kSilu, y), "short_conv_update", "'x'", "2 dimensions", "3");
  EXPECT_KIMI_ERROR(short_conv_update(x, w, cache, {}, kSilu, y4), "'y'", "[3, 8]", "[4, 8]");
  EXPECT_KIMI_ERROR(short_conv_update(x, wbig, cache, {}, kSilu, y), "'w'", "[1, 8]", "12");
  EXPECT_KIMI_ERROR(short_conv_update(x, w, {}, {}, kSilu, y), "'cache'", "a tensor", "none");
  EXPECT_KIMI_ERROR(short_conv_update(x, w, cache2, {}, kSilu, y), "'cache'", "[3, 8, 3]", "[3, 8, 2]");
  EXPECT_KIMI_ERROR(short_conv_update(x, w, pool, {}, kSilu, y), "'cache'", "[3, 8, 3]", "[6, 8, 3]");
  EXPECT_KIMI_ERROR(short_conv_update(x, w, pool, two, kSilu, y), "'cache_slots'", "[3]", "[2]");
  EXPECT_KIMI_ERROR(short_conv_update(x, w, pool, slotsf, kSilu, y), "'cache_slots'", "i32/i64", "f32");
  EXPECT_KIMI_ERROR(short_conv_update(x, w, pool, out_of_range, kSilu, y), "'cache_slots'", "[0, 6)",
                    "cache_slots[1] = 6");
  EXPECT_KIMI_ERROR(short_conv_update(x, w, pool, negative, kSilu, y), "'cache_slots'", "[0, 6)",
                    "cache_slots[1] = -1");
  // Duplicates are rejected before anything is written.
  const Tensor pool0 = copy_of(pool), y0 = copy_of(y);
  EXPECT_KIMI_ERROR(short_conv_update(x, w, pool, dup, kSilu, y), "'cache_slots'", "distinct",
                    "cache_slots[0] = cache_slots[2] = 2");
  EXPECT_TRUE(same_bytes(pool, pool0));
  EXPECT_TRUE(same_bytes(y, y0));
  EXPECT_KIMI_ERROR(short_conv_update(x, w, cache, {}, kSilu, x), "short_conv_update", "'y'", "not in place");
  TensorView xg = x.view();
  xg.device = Device::cuda(0);
  EXPECT_KIMI_ERROR(short_conv_update(xg, w, cache, {}, kSilu, y), "'w'", "cuda:0", "cpu");
}

}  // namespace
}  // namespace kimi
