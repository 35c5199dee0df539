// src/model/kda_block.cpp: one KDA mixer on a packed batch (SPEC 5).
//
//   q, k, v = SiLU(conv(W_{q,k,v} x))              [T, P]   conv inputs continue from the slots' conv caches
//   f = W_fb W_fa x                                [T, P]   raw gate input (gate fused into the KDA op)
//   b = W_b x                                      [T, H]   raw beta logit (sigmoid fused)
//   o = KDA(q, k, v, f, b; state of each slot)     [T, H, V]  q, k L2-normalized in the op, scale K^-0.5
//   y = RMSNorm_head(o) * sigmoid(z),  z = W_g x (full rank) or W_gb W_ga x (low rank)
//   out (+)= W_o y
// Prefill (any sequence with > 1 new token): convs, kda_chunk_fwd, gated_rms_norm. Decode (one token each):
// everything between the projections in one kda_decode_step on the slot pools.
#include "kimi/ops/conv.h"
#include "kimi/ops/kda.h"
#include "kimi/ops/kda_decode.h"
#include "kimi/ops/linear.h"
#include "kimi/ops/norm.h"
#include "core/views.h"
#include "model/blocks.h"

namespace kimi::model {
namespace {

// y = SiLU(causal depthwise conv of x), continuing from and updating the slots' rows of the cache pool.
void conv(const Tensor& pool, TensorView w, const Step& s, TensorView x, TensorView y, const Context& ctx) {
  short_conv_fwd(view::insert_dim0(x), w, pool, pool, s.cu_t, s.slot_t, ConvActivation::silu, view::insert_dim0(y),
                 ctx);
}

}  // namespace

void kda_block(const Config& c, const KdaLayerWeights& w, Cache::Layer& cache, const Step& s, TensorView x,
               TensorView out, float beta, const Context& ctx) {
  const int64_t T = s.T, H = c.kda_num_heads, K = c.kda_head_dim, P = H * K;
  const Device dev = x.device;  // the block's device: its weights, cache pools and temporaries live there
  Tensor xq(DType::f32, {T, P}, dev), xk(DType::f32, {T, P}, dev), xv(DType::f32, {T, P}, dev);  // before the convs
  linear(x, w.q, xq, 0.f, ctx);
  linear(x, w.k, xk, 0.f, ctx);
  linear(x, w.v, xv, 0.f, ctx);
  Tensor fa(DType::f32, {T, K}, dev), f(DType::f32, {T, P}, dev), b(DType::f32, {T, H}, dev), z(DType::f32, {T, P}, dev);
  linear(x, w.f_a, fa, 0.f, ctx);
  linear(fa, w.f_b, f, 0.f, ctx);
  linear(x, w.b, b, 0.f, ctx);
  if (w.g.w.present()) {
    linear(x, w.g, z, 0.f, ctx);
  } else {
    linear(x, w.g_a, fa, 0.f, ctx);
    linear(fa, w.g_b, z, 0.f, ctx);
  }
  const KdaGate gate{c.gate_lower_bound ? GateForm::bounded : GateForm::softplus, w.A_log, w.dt_bias,
                     c.gate_lower_bound.value_or(0.f)};
  Tensor y(DType::f32, {T, P}, dev);  // [T, H, V]

  if (s.decode) {  // one token per sequence: the fused step on the slot pools
    KdaDecodeArgs d;
    d.x_q = xq, d.x_k = xk, d.x_v = xv, d.conv_q = w.conv_q, d.conv_k = w.conv_k, d.conv_v = w.conv_v;
    d.cache_q = cache.conv_q, d.cache_k = cache.conv_k, d.cache_v = cache.conv_v;
    d.f = f, d.gate = gate, d.b = b, d.z = z, d.o_norm = w.o_norm, d.norm_eps = c.rms_norm_eps;
    d.state = cache.state, d.slots = s.slot_t, d.y = y;
    kda_decode_step(d, ctx);
  } else {
    Tensor q(DType::f32, {T, P}, dev), k(DType::f32, {T, P}, dev), v(DType::f32, {T, P}, dev);
    conv(cache.conv_q, w.conv_q, s, xq, q, ctx);
    conv(cache.conv_k, w.conv_k, s, xk, k, ctx);
    conv(cache.conv_v, w.conv_v, s, xv, v, ctx);
    Tensor o(DType::f32, {T, P}, dev);  // [T, H, V]
    KdaArgs a;
    auto heads = [&](const Tensor& t) { return view::insert_dim0(view::split_last(t, H)); };  // [1, T, H, D]
    a.q = heads(q), a.k = heads(k), a.v = heads(v);
    a.g = heads(f);
    a.beta = view::insert_dim0(b);
    a.gate = gate;
    a.beta_sigmoid_in_kernel = true;
    a.qk_l2norm_in_kernel = true;
    a.initial_state = cache.state, a.final_state = cache.state;  // [S, H, K, V], updated in place
    a.state_slots = s.slot_t;
    a.cu_seqlens = s.cu_t;
    a.o = heads(o);
    kda_chunk_fwd(a, 64, ctx);
    gated_rms_norm(view::split_last(o, H), view::split_last(z, H), w.o_norm, c.rms_norm_eps, view::split_last(y, H),
                   ctx);
  }
  linear(y, w.o, out, beta, ctx);
}

}  // namespace kimi::model
