// src/model/kda_block.cpp: one KDA mixer on a packed batch (SPEC 5).
//
//   q, k, v = SiLU(conv(W_{q,k,v} x))              [T, P]   conv inputs continue from the slots' conv caches
//   f = W_fb W_fa x                                [T, P]   raw gate input (gate fused into the KDA op)
//   b = W_b x                                      [T, H]   raw beta logit (sigmoid fused)
//   o = KDA(q, k, v, f, b; state of each slot)     [T, H, V]  q, k L2-normalized in the op, scale K^-0.5
//   y = RMSNorm_head(o) * sigmoid(z),  z = W_g x (full rank) or W_gb W_ga x (low rank)
//   out (+)= W_o y
#include <cstring>

#include "kimi/ops/conv.h"
#include "kimi/ops/kda.h"
#include "kimi/ops/linear.h"
#include "kimi/ops/norm.h"
#include "model/blocks.h"

namespace kimi::model {
namespace {

// The conv caches of the batch's slots as one [N, P, W-1] tensor (gathered, then scattered back).
void copy_rows(const Tensor& pool, const Step& s, Tensor& batch, bool to_pool) {
  const size_t row = pool.nbytes() / size_t(pool.view().size(0));
  for (int64_t n = 0; n < s.N; ++n) {
    char* p = static_cast<char*>(pool.data()) + size_t(s.slot[size_t(n)]) * row;
    char* b = static_cast<char*>(batch.data()) + size_t(n) * row;
    to_pool ? std::memcpy(p, b, row) : std::memcpy(b, p, row);
  }
}

// y = SiLU(causal depthwise conv of x), continuing from and updating the slots' cache.
void conv(const Tensor& pool, TensorView w, const Step& s, TensorView x, TensorView y, const Context& ctx) {
  Tensor c(DType::f32, {s.N, pool.view().size(1), pool.view().size(2)});
  copy_rows(pool, s, c, false);
  short_conv_fwd(batch1(x), w, c, c, s.cu_t, ConvActivation::silu, batch1(y), ctx);
  copy_rows(pool, s, c, true);
}

}  // namespace

void kda_block(const Config& c, const KdaLayerWeights& w, Cache::Layer& cache, const Step& s, TensorView x,
               TensorView out, float beta, const Context& ctx) {
  const int64_t T = s.T, H = c.kda_num_heads, K = c.kda_head_dim, P = H * K;
  Tensor raw(DType::f32, {T, P}), q(DType::f32, {T, P}), k(DType::f32, {T, P}), v(DType::f32, {T, P});
  linear(x, w.q, raw, 0.f, ctx);
  conv(cache.conv_q, w.conv_q, s, raw, q, ctx);
  linear(x, w.k, raw, 0.f, ctx);
  conv(cache.conv_k, w.conv_k, s, raw, k, ctx);
  linear(x, w.v, raw, 0.f, ctx);
  conv(cache.conv_v, w.conv_v, s, raw, v, ctx);

  Tensor fa(DType::f32, {T, K}), f(DType::f32, {T, P}), b(DType::f32, {T, H});
  linear(x, w.f_a, fa, 0.f, ctx);
  linear(fa, w.f_b, f, 0.f, ctx);
  linear(x, w.b, b, 0.f, ctx);

  Tensor o(DType::f32, {T, P});  // [T, H, V]
  KdaArgs a;
  a.q = batch1(split_last(q, H)), a.k = batch1(split_last(k, H)), a.v = batch1(split_last(v, H));
  a.g = batch1(split_last(f, H));
  a.beta = batch1(b);
  a.gate = KdaGate{c.gate_lower_bound ? GateForm::bounded : GateForm::softplus, w.A_log, w.dt_bias,
                   c.gate_lower_bound.value_or(0.f)};
  a.beta_sigmoid_in_kernel = true;
  a.qk_l2norm_in_kernel = true;
  a.initial_state = cache.state, a.final_state = cache.state;  // [S, H, K, V], updated in place
  a.state_slots = s.slot_t;
  a.cu_seqlens = s.cu_t;
  a.o = batch1(split_last(o, H));
  if (s.decode) {
    kda_recurrent_fwd(a, ctx);
  } else {
    kda_chunk_fwd(a, 64, ctx);
  }

  Tensor z(DType::f32, {T, P});
  if (w.g.w.present()) {
    linear(x, w.g, z, 0.f, ctx);
  } else {
    linear(x, w.g_a, fa, 0.f, ctx);
    linear(fa, w.g_b, z, 0.f, ctx);
  }
  gated_rms_norm(split_last(o, H), split_last(z, H), w.o_norm, c.rms_norm_eps, split_last(o, H), ctx);
  linear(o, w.o, out, beta, ctx);
}

}  // namespace kimi::model
