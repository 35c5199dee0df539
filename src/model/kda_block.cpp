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
// Every temporary (kda_temps) is in x's dtype, the activation dtype; the state and conv caches are f32, the gate,
// beta, norms and the recurrence compute in fp32 inside the operators; W_o adds into the f32 residual.
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
void conv(TensorView pool, TensorView w, const Step& s, TensorView x, TensorView y, const Context& ctx) {
  short_conv_fwd(view::insert_dim0(x), w, pool, pool, s.cu_t, s.slot_t, ConvActivation::silu, view::insert_dim0(y),
                 ctx);
}

}  // namespace

KdaTemps kda_temps(Workspace& ws, const Config& c, int64_t T, DType dt, bool decode) {
  const int64_t H = c.kda_num_heads, K = c.kda_head_dim, P = H * K;
  KdaTemps t;
  t.xq = ws.alloc(dt, {T, P}), t.xk = ws.alloc(dt, {T, P}), t.xv = ws.alloc(dt, {T, P});
  t.fa = ws.alloc(dt, {T, K}), t.f = ws.alloc(dt, {T, P}), t.b = ws.alloc(dt, {T, H}), t.z = ws.alloc(dt, {T, P});
  if (!c.kda_full_rank_gate) t.ga = ws.alloc(dt, {T, K});
  t.y = ws.alloc(dt, {T, P});  // [T, H, V]
  if (!decode) t.q = ws.alloc(dt, {T, P}), t.k = ws.alloc(dt, {T, P}), t.v = ws.alloc(dt, {T, P}), t.o = ws.alloc(dt, {T, P});
  return t;
}

void kda_block(const Config& c, const KdaLayerWeights& w, Cache::Layer& cache, const Step& s, TensorView x,
               TensorView out, float beta, Workspace& ws, const Context& ctx) {
  const int64_t H = c.kda_num_heads;
  const Workspace::Scope scope(ws);
  const KdaTemps t = kda_temps(ws, c, s.T, x.dtype, s.decode);  // on the block's device, in x's dtype
  // The projections of x as one call (one launch at decode sizes), then the low-rank second halves as another.
  const bool full_gate = w.g.w.present();
  const LinearJob first[] = {{x, w.q, t.xq}, {x, w.k, t.xk}, {x, w.v, t.xv}, {x, w.f_a, t.fa}, {x, w.b, t.b},
                             full_gate ? LinearJob{x, w.g, t.z} : LinearJob{x, w.g_a, t.ga}};
  linear_many(first, ctx);
  if (full_gate) {
    linear(t.fa, w.f_b, t.f, 0.f, ctx);
  } else {
    const LinearJob second[] = {{t.fa, w.f_b, t.f}, {t.ga, w.g_b, t.z}};
    linear_many(second, ctx);
  }
  const KdaGate gate{c.gate_lower_bound ? GateForm::bounded : GateForm::softplus, w.A_log, w.dt_bias,
                     c.gate_lower_bound.value_or(0.f)};

  if (s.decode) {  // one token per sequence: the fused step on the slot pools
    KdaDecodeArgs d;
    d.x_q = t.xq, d.x_k = t.xk, d.x_v = t.xv, d.conv_q = w.conv_q, d.conv_k = w.conv_k, d.conv_v = w.conv_v;
    d.cache_q = cache.conv_q, d.cache_k = cache.conv_k, d.cache_v = cache.conv_v;
    d.f = t.f, d.gate = gate, d.b = t.b, d.z = t.z, d.o_norm = w.o_norm, d.norm_eps = c.rms_norm_eps;
    d.state = cache.state, d.slots = s.slot_t, d.y = t.y;
    kda_decode_step(d, ctx);
  } else {
    conv(cache.conv_q, w.conv_q, s, t.xq, t.q, ctx);
    conv(cache.conv_k, w.conv_k, s, t.xk, t.k, ctx);
    conv(cache.conv_v, w.conv_v, s, t.xv, t.v, ctx);
    KdaArgs a;
    auto heads = [&](TensorView v) { return view::insert_dim0(view::split_last(v, H)); };  // [1, T, H, D]
    a.q = heads(t.q), a.k = heads(t.k), a.v = heads(t.v);
    a.g = heads(t.f);
    a.beta = view::insert_dim0(t.b);
    a.gate = gate;
    a.beta_sigmoid_in_kernel = true;
    a.qk_l2norm_in_kernel = true;
    a.initial_state = cache.state, a.final_state = cache.state;  // [S, H, K, V] f32, updated in place
    a.state_slots = s.slot_t;
    a.cu_seqlens = s.cu_t;
    a.o = heads(t.o);
    kda_chunk_fwd(a, 64, ctx);
    gated_rms_norm(view::split_last(t.o, H), view::split_last(t.z, H), w.o_norm, c.rms_norm_eps,
                   view::split_last(t.y, H), ctx);
  }
  linear(t.y, w.o, out, beta, ctx);  // into the f32 residual
}

}  // namespace kimi::model
