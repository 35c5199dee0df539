// Properties and bad-input tests for kimi/ops/attn_res.h (values against the oracle are in the harness).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "expect_error.h"
#include "kimi/ops/attn_res.h"

namespace kimi {
namespace {

Tensor random(DType dt, std::initializer_list<int64_t> shape, uint64_t seed, float lo = -2.f, float hi = 2.f) {
  Tensor t(dt, shape);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) store_from_f32(t.data(), dt, i, dist(rng));
  return t;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// No blocks: one candidate with weight exactly 1, so out is partial, bit for bit (even with eps 0
// and an all-zero row).
TEST(AttnRes, NoBlocksReturnsPartial) {
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    Tensor partial = random(dt, {5, 7}, 1);
    std::memset(partial.data(), 0, 7 * size_t(dtype_size(dt)));  // row 0 all zero
    const Tensor pw = random(dt, {7}, 2), nw = random(dt, {7}, 3);
    Tensor out(dt, {5, 7});
    attn_res(partial, {}, pw, nw, 0.f, out);
    EXPECT_TRUE(same_bytes(out, partial)) << dtype_name(dt);
  }
}

// The candidates are a set: any order of (blocks..., partial) gives the same output.
TEST(AttnRes, CandidateOrderDoesNotMatter) {
  const int64_t T = 6, d = 64, n = 5;
  std::vector<Tensor> c;
  for (int64_t i = 0; i <= n; ++i) c.push_back(random(DType::f32, {T, d}, 10 + uint64_t(i), -1.f - float(i), 1.f + float(i)));
  const Tensor pw = random(DType::f32, {d}, 2), nw = random(DType::f32, {d}, 3, 0.5f, 1.5f);
  auto run = [&](const std::vector<int>& order) {  // order[0..n) are the blocks, order[n] the partial
    std::vector<TensorView> blocks;
    for (int i = 0; i < n; ++i) blocks.push_back(c[size_t(order[size_t(i)])]);
    Tensor out(DType::f32, {T, d});
    attn_res(c[size_t(order[size_t(n)])], blocks, pw, nw, 1e-5f, out);
    return out;
  };
  const Tensor a = run({0, 1, 2, 3, 4, 5}), b = run({3, 5, 1, 0, 4, 2}), e = run({5, 4, 3, 2, 1, 0});
  double ref = 0;
  for (int64_t i = 0; i < T * d; ++i) ref = std::max(ref, std::abs(double(a.data_as<float>()[i])));
  for (int64_t i = 0; i < T * d; ++i) {
    EXPECT_NEAR(b.data_as<float>()[i], a.data_as<float>()[i], 1e-6 * ref);
    EXPECT_NEAR(e.data_as<float>()[i], a.data_as<float>()[i], 1e-6 * ref);
  }
  // ... and the output is a proper mix: every element lies within the candidates' range.
  for (int64_t i = 0; i < T * d; ++i) {
    float lo = INFINITY, hi = -INFINITY;
    for (const Tensor& t : c) lo = std::min(lo, t.data_as<float>()[i]), hi = std::max(hi, t.data_as<float>()[i]);
    EXPECT_GE(a.data_as<float>()[i], lo - 1e-5f);
    EXPECT_LE(a.data_as<float>()[i], hi + 1e-5f);
  }
}

// A candidate aligned with the pseudo-query wins the softmax outright: out is that candidate exactly,
// finite, even with huge scores (|s| up to sqrt(d) * |norm_w * proj_w| = 6400) and huge values.
TEST(AttnRes, OverwhelmingScoreSaturatesCleanly) {
  const int64_t T = 3, d = 64, n = 8, winner = 3;
  Tensor pw(DType::f32, {d}), nw(DType::f32, {d});
  for (int64_t i = 0; i < d; ++i) pw.data_as<float>()[i] = 100.f, nw.data_as<float>()[i] = 1.f;
  for (float mag : {1.f, 1e4f}) {
    std::vector<Tensor> blocks;
    for (int64_t i = 0; i < n; ++i) blocks.push_back(random(DType::f32, {T, d}, 20 + uint64_t(i), -mag, mag));
    for (int64_t j = 0; j < T * d; ++j) blocks[winner].data_as<float>()[j] = mag * (1.f + 0.01f * float(j % 7));
    const Tensor partial = random(DType::f32, {T, d}, 5, -mag, mag);
    std::vector<TensorView> views(blocks.begin(), blocks.end());
    Tensor out(DType::f32, {T, d});
    attn_res(partial, views, pw, nw, 1e-5f, out);
    EXPECT_TRUE(same_bytes(out, blocks[winner])) << "mag " << mag;
    for (int64_t j = 0; j < T * d; ++j) EXPECT_TRUE(std::isfinite(out.data_as<float>()[j]));
  }
}

// out may be the partial itself (token-local: each row is read before it is written).
TEST(AttnRes, InPlaceOverPartial) {
  const Tensor partial = random(DType::bf16, {4, 33}, 1), b0 = random(DType::bf16, {4, 33}, 2);
  const Tensor pw = random(DType::bf16, {33}, 3), nw = random(DType::bf16, {33}, 4, 0.5f, 1.5f);
  const TensorView blocks[1] = {b0};
  Tensor out(DType::bf16, {4, 33}), inplace(DType::bf16, {4, 33});
  std::memcpy(inplace.data(), partial.data(), partial.nbytes());
  attn_res(partial, blocks, pw, nw, 1e-5f, out);
  attn_res(inplace, blocks, pw, nw, 1e-5f, inplace);
  EXPECT_TRUE(same_bytes(out, inplace));
}

TEST(AttnRes, RejectsBadArguments) {
  const int64_t T = 4, d = 8;
  Tensor partial(DType::f32, {T, d}), out(DType::f32, {T, d}), pw(DType::f32, {d}), nw(DType::f32, {d});
  Tensor b(DType::f32, {T, d}), b7(DType::f32, {T, 7}), b5(DType::f32, {5, d}), bi(DType::i32, {T, d});
  Tensor pw7(DType::f32, {7}), nwi(DType::i32, {d}), out5(DType::f32, {5, d}), p3(DType::f32, {1, T, d});
  const TensorView bad_shape[2] = {b, b7}, bad_rows[3] = {b, b, b5}, bad_dtype[1] = {bi}, ok[2] = {b, b};
  EXPECT_KIMI_ERROR(attn_res(partial, bad_shape, pw, nw, 1e-5f, out), "attn_res", "'blocks[1]'", "[4, 8]", "[4, 7]");
  EXPECT_KIMI_ERROR(attn_res(partial, bad_rows, pw, nw, 1e-5f, out), "'blocks[2]'", "[4, 8]", "[5, 8]");
  EXPECT_KIMI_ERROR(attn_res(partial, bad_dtype, pw, nw, 1e-5f, out), "'blocks[0]'", "f32/bf16/f16", "i32");
  EXPECT_KIMI_ERROR(attn_res(partial, ok, pw7, nw, 1e-5f, out), "'proj_w'", "[8]", "[7]");
  EXPECT_KIMI_ERROR(attn_res(partial, ok, pw, pw7, 1e-5f, out), "'norm_w'", "[8]", "[7]");
  EXPECT_KIMI_ERROR(attn_res(partial, ok, pw, nwi, 1e-5f, out), "'norm_w'", "f32/bf16/f16", "i32");
  EXPECT_KIMI_ERROR(attn_res(partial, ok, pw, nw, 1e-5f, out5), "'out'", "[4, 8]", "[5, 8]");
  EXPECT_KIMI_ERROR(attn_res(p3, ok, pw, nw, 1e-5f, out), "'partial'", "2 dimensions", "3");
  EXPECT_KIMI_ERROR(attn_res(TensorView{}, ok, pw, nw, 1e-5f, out), "'partial'", "none");
  EXPECT_KIMI_ERROR(attn_res(partial, ok, pw, nw, -1.f, out), "'eps'", ">= 0");
  Tensor sq(DType::f32, {d, d}), outsq(DType::f32, {d, d}), wsq(DType::f32, {d});
  const TensorView transposed[1] = {sq.view().transpose(0, 1)};
  EXPECT_KIMI_ERROR(attn_res(sq, transposed, wsq, wsq, 1e-5f, outsq), "'blocks[0]'", "stride 1");
  TensorView bg = b.view();
  bg.device = Device::cuda(0);
  const TensorView on_gpu[2] = {b, bg};
  EXPECT_KIMI_ERROR(attn_res(partial, on_gpu, pw, nw, 1e-5f, out), "'blocks[1]'", "cpu", "cuda:0");
}

}  // namespace
}  // namespace kimi
