// kimi/ops/kda_decode.h: the fused decode step equals its parts run one by one (short_conv_update x3 with
// cache slots, kda_recurrent_fwd with state slots, gated_rms_norm) bit for bit, in both state layouts,
// with and without the output gate, bf16 inputs; pool rows outside the slots are untouched; bad input is
// rejected before any cache or state row changes. (The fp64 oracle comparison is a harness case.)
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "expect_error.h"
#include "kimi/ops/conv.h"
#include "kimi/ops/kda.h"
#include "kimi/ops/kda_decode.h"
#include "kimi/ops/norm.h"

namespace kimi {
namespace {

void fill(const Tensor& t, std::mt19937_64& rng, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) store_from_f32(t.data(), t.view().dtype, i, float(u(rng)));
}

Tensor copy_of(const Tensor& t) {
  Tensor c(t.view().dtype, std::span<const int64_t>(t.view().shape.data(), size_t(t.view().ndim)));
  std::memcpy(c.data(), t.data(), t.nbytes());
  return c;
}

bool same_bytes(const Tensor& a, const Tensor& b) { return a.nbytes() == b.nbytes() && !std::memcmp(a.data(), b.data(), a.nbytes()); }

struct Step {
  int64_t N = 3, H = 2, K = 16, V = 8, S = 5, W = 4;
  Tensor xq, xk, xv, f, b, z, wq, wk, wv, cq, ck, cv, A_log, dt_bias, o_norm, state, slots, y;
  Step(DType dt, StateLayout layout, uint64_t seed) {
    const int64_t P = H * K, Pv = H * V;
    std::mt19937_64 rng(seed);
    xq = Tensor(dt, {N, P}), xk = Tensor(dt, {N, P}), xv = Tensor(dt, {N, Pv}), f = Tensor(dt, {N, P});
    b = Tensor(dt, {N, H}), z = Tensor(dt, {N, Pv}), y = Tensor(dt, {N, Pv});
    wq = Tensor(DType::f32, {P, 1, W}), wk = Tensor(DType::f32, {P, 1, W}), wv = Tensor(DType::f32, {Pv, 1, W});
    cq = Tensor(DType::f32, {S, P, W - 1}), ck = Tensor(DType::f32, {S, P, W - 1}), cv = Tensor(DType::f32, {S, Pv, W - 1});
    A_log = Tensor(DType::f32, {H}), dt_bias = Tensor(DType::f32, {P}), o_norm = Tensor(DType::f32, {V});
    state = layout == StateLayout::kv ? Tensor(DType::f32, {S, H, K, V}) : Tensor(DType::f32, {S, H, V, K});
    for (const Tensor* t : {&xq, &xk, &xv, &z, &wq, &wk, &wv, &cq, &ck, &cv, &state}) fill(*t, rng, -1, 1);
    fill(f, rng, -8, 8), fill(b, rng, -4, 4), fill(A_log, rng, -2, 1), fill(dt_bias, rng, -3, 3), fill(o_norm, rng, 0.5, 1.5);
    slots = Tensor(DType::i32, {N});
    const int32_t s[3] = {4, 0, 2};
    std::memcpy(slots.data(), s, sizeof s);
  }
};

KdaDecodeArgs args_of(const Step& s, GateForm form, StateLayout layout, bool gated) {
  KdaDecodeArgs a;
  a.x_q = s.xq, a.x_k = s.xk, a.x_v = s.xv, a.conv_q = s.wq, a.conv_k = s.wk, a.conv_v = s.wv;
  a.cache_q = s.cq, a.cache_k = s.ck, a.cache_v = s.cv, a.f = s.f, a.b = s.b;
  a.gate = KdaGate{form, s.A_log, s.dt_bias, -5.f};
  if (gated) a.z = s.z;
  a.o_norm = s.o_norm, a.norm_eps = 1e-5f, a.state = s.state, a.state_layout = layout, a.slots = s.slots, a.y = s.y;
  return a;
}

TEST(KdaDecodeStep, EqualsItsPartsInPools) {
  for (StateLayout layout : {StateLayout::kv, StateLayout::vk}) {
    for (bool gated : {false, true}) {
      for (DType dt : {DType::f32, DType::bf16}) {
        const GateForm form = gated ? GateForm::bounded : GateForm::softplus;
        const Step fused(dt, layout, 7), parts(dt, layout, 7);
        kda_decode_step(args_of(fused, form, layout, gated));
        // the same step, one public operator at a time
        const int64_t N = parts.N, H = parts.H, K = parts.K, V = parts.V;
        Tensor q(DType::f32, {N, H * K}), k(DType::f32, {N, H * K}), v(DType::f32, {N, H * V}), o(DType::f32, {N, H * V});
        short_conv_update(parts.xq, parts.wq, parts.cq, parts.slots, ConvActivation::silu, q);
        short_conv_update(parts.xk, parts.wk, parts.ck, parts.slots, ConvActivation::silu, k);
        short_conv_update(parts.xv, parts.wv, parts.cv, parts.slots, ConvActivation::silu, v);
        KdaArgs r;
        r.q = q.view().reshape({N, 1, H, K}), r.k = k.view().reshape({N, 1, H, K}), r.v = v.view().reshape({N, 1, H, V});
        r.g = parts.f.view().reshape({N, 1, H, K}), r.beta = parts.b.view().reshape({N, 1, H});
        r.gate = KdaGate{form, parts.A_log, parts.dt_bias, -5.f};
        r.beta_sigmoid_in_kernel = r.qk_l2norm_in_kernel = true;
        r.initial_state = r.final_state = parts.state;
        r.state_layout = layout, r.state_slots = parts.slots;
        r.o = o.view().reshape({N, 1, H, V});
        kda_recurrent_fwd(r);
        gated_rms_norm(o.view().reshape({N, H, V}), gated ? parts.z.view().reshape({N, H, V}) : TensorView{}, parts.o_norm,
                       1e-5f, parts.y.view().reshape({N, H, V}));
        const std::string what = std::string(layout == StateLayout::kv ? "kv" : "vk") + (gated ? " gated " : " ") +
                                 std::string(dtype_name(dt));
        EXPECT_TRUE(same_bytes(fused.y, parts.y)) << what;
        EXPECT_TRUE(same_bytes(fused.state, parts.state)) << what;  // incl. untouched rows 1 and 3
        EXPECT_TRUE(same_bytes(fused.cq, parts.cq) && same_bytes(fused.ck, parts.ck) && same_bytes(fused.cv, parts.cv)) << what;
        const Step fresh(dt, layout, 7);
        const size_t row = fresh.state.nbytes() / 5;
        for (int64_t untouched : {1, 3})
          EXPECT_EQ(std::memcmp(static_cast<char*>(fused.state.data()) + untouched * row,
                                static_cast<char*>(fresh.state.data()) + untouched * row, row), 0) << what;
      }
    }
  }
}

TEST(KdaDecodeStep, RejectsBadInputBeforeWriting) {
  const Step s(DType::bf16, StateLayout::kv, 9);
  const Tensor state0 = copy_of(s.state), cq0 = copy_of(s.cq), y0 = copy_of(s.y);
  auto with = [&](auto edit) {
    KdaDecodeArgs a = args_of(s, GateForm::bounded, StateLayout::kv, true);
    edit(a);
    return a;
  };
  const Tensor bad_norm(DType::f32, {9}), bad_state(DType::f32, {5, 2, 8, 16}), bad_cache(DType::f32, {5, 32, 2});
  const Tensor dup(DType::i32, {3}), wide(DType::f32, {32, 1, 5}), bf_state(DType::bf16, {5, 2, 16, 8});
  EXPECT_KIMI_ERROR(kda_decode_step(with([&](auto& a) { a.o_norm = bad_norm; })), "kda_decode_step", "'o_norm'", "[8]", "[9]");
  EXPECT_KIMI_ERROR(kda_decode_step(with([&](auto& a) { a.state = bad_state; })), "'state'", "[5, 2, 16, 8]", "[5, 2, 8, 16]");
  EXPECT_KIMI_ERROR(kda_decode_step(with([&](auto& a) { a.state = bf_state; })), "'state'", "f32", "bf16");
  EXPECT_KIMI_ERROR(kda_decode_step(with([&](auto& a) { a.cache_k = bad_cache; })), "'cache_k'", "[5, 32, 3]", "[5, 32, 2]");
  EXPECT_KIMI_ERROR(kda_decode_step(with([&](auto& a) { a.slots = dup; })), "'slots'", "distinct", "slots[0] = slots[1] = 0");
  EXPECT_KIMI_ERROR(kda_decode_step(with([&](auto& a) { a.conv_k = wide; })), "'conv_k'", "kernel width 4", "5");
  EXPECT_KIMI_ERROR(kda_decode_step(with([&](auto& a) { a.y = a.x_v; })), "'y'", "disjoint from 'x_v'");
  EXPECT_KIMI_ERROR(kda_decode_step(with([&](auto& a) { a.gate.lower_bound = 1.f; })), "'gate.lower_bound'", "<= 0");
  const Tensor b3(DType::bf16, {3, 3});
  EXPECT_KIMI_ERROR(kda_decode_step(with([&](auto& a) { a.b = b3; })), "'b'", "dividing x_q.shape[1] = 32", "3");
  EXPECT_TRUE(same_bytes(s.state, state0));
  EXPECT_TRUE(same_bytes(s.cq, cq0));
  EXPECT_TRUE(same_bytes(s.y, y0));
}

}  // namespace
}  // namespace kimi
