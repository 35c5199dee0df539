// src/model/mla_block.cpp: one gated MLA mixer on a packed batch (SPEC 6).
//
//   q = W_qb RMSNorm_qa(W_qa x)  (or W_q x)             [T, H, Dn+Pr]
//   [c | k_pe] = W_kva x;  latent = RMSNorm_kva(c)       [T, R], [T, Pr]   (eps mla_norm_eps, 1e-6)
//   cache[slot, start + t] = [latent_t | k_pe_t]         every new token of every sequence
//   o = causal attention over the sequence's tokens      [T, H, Dv]
//       fresh sequence (start 0): explicit prefill form over its new tokens (mla_prefill)
//       continuing sequence:      absorbed form, token t attends to cache rows [0, start + t] (mla_decode)
//   o *= sigmoid(W_g x) (K3 output gate, inside the attention ops);  out (+)= W_o o
// Per step, not per sequence: one mla_cache_write (a row per token, with the Step's positions and slots), one
// packed varlen mla_prefill over every fresh sequence and one mla_decode over every continuing token (lens and
// slots per token, from the Step). When fresh and continuing sequences interleave in the batch, the attention's
// rows are gathered into "MLA order" (fresh first) and the output gathered back (gather_rows, Step::mla_perm).
// Temporaries (mla_temps) are in x's dtype, the activation dtype; the latent cache is f32.
#include <optional>
#include <span>

#include "kimi/ops/gather.h"
#include "kimi/ops/linear.h"
#include "kimi/ops/mla.h"
#include "kimi/ops/norm.h"
#include "core/views.h"
#include "model/blocks.h"

namespace kimi::model {

MlaTemps mla_temps(Workspace& ws, const Config& c, int64_t T, DType dt, bool reorder) {
  const int64_t H = c.num_attention_heads, Dq = c.qk_nope_head_dim + c.qk_rope_head_dim, Dv = c.v_head_dim,
                R = c.kv_lora_rank, Pr = c.qk_rope_head_dim;
  MlaTemps t;
  t.q = ws.alloc(dt, {T, H * Dq});
  if (c.q_lora_rank) t.qa = ws.alloc(dt, {T, *c.q_lora_rank});
  t.kva = ws.alloc(dt, {T, R + Pr});
  t.latent = ws.alloc(dt, {T, R});
  if (c.mla_use_output_gate) t.gate = ws.alloc(dt, {T, H * Dv});
  t.o = ws.alloc(dt, {T, H * Dv});
  if (reorder) {
    t.q_r = ws.alloc(dt, {T, H * Dq}), t.latent_r = ws.alloc(dt, {T, R}), t.pe_r = ws.alloc(dt, {T, Pr});
    if (c.mla_use_output_gate) t.gate_r = ws.alloc(dt, {T, H * Dv});
    t.o_r = ws.alloc(dt, {T, H * Dv});
  }
  return t;
}

void mla_block(const Config& c, const MlaLayerWeights& w, Cache::Layer& cache, const Step& s, TensorView x,
               TensorView out, float beta, Workspace& ws, const Context& ctx) {
  const int64_t T = s.T, H = c.num_attention_heads, R = c.kv_lora_rank, Pr = c.qk_rope_head_dim;
  const Workspace::Scope scope(ws);
  const MlaTemps t = mla_temps(ws, c, T, x.dtype, s.mla_reorder);  // on the block's device, in x's dtype
  // The projections of x as one call (one launch at decode sizes): q (or q_a), kv_a and the output gate.
  const bool low_rank_q = !w.q.w.present(), gated = w.g.w.present();
  const LinearJob jobs[] = {low_rank_q ? LinearJob{x, w.q_a, t.qa} : LinearJob{x, w.q, t.q}, {x, w.kv_a, t.kva},
                            {x, w.g, t.gate}};
  linear_many(std::span(jobs, gated ? 3 : 2), ctx);
  if (low_rank_q) {
    rms_norm(t.qa, w.q_a_norm, c.mla_norm_eps, t.qa, ctx);
    linear(t.qa, w.q_b, t.q, 0.f, ctx);
  }
  rms_norm(t.kva.slice(1, 0, R), w.kv_a_norm, c.mla_norm_eps, t.latent, ctx);
  const TensorView k_pe = t.kva.slice(1, R, R + Pr);  // [T, Pr], row stride R + Pr

  // Every new token's [latent | k_pe] into its slot at its position: one write, a row per token.
  mla_cache_write(view::insert_dim(t.latent, 1), view::insert_dim(k_pe, 1), cache.latent, s.pos_t, s.tok_slot_t, ctx);

  // The attention in MLA order (fresh sequences' tokens first): the batch's own rows, or gathered copies.
  TensorView q = t.q, latent = t.latent, pe = k_pe, gate = t.gate, o = t.o;
  if (s.mla_reorder) {
    gather_rows(t.q, s.mla_perm, t.q_r, ctx);
    gather_rows(t.latent, s.mla_perm, t.latent_r, ctx);
    gather_rows(k_pe, s.mla_perm, t.pe_r, ctx);
    if (gated) gather_rows(t.gate, s.mla_perm, t.gate_r, ctx);
    q = t.q_r, latent = t.latent_r, pe = t.pe_r, gate = t.gate_r, o = t.o_r;
  }
  const int64_t F = s.mla_fresh;
  auto rows = [](TensorView v, int64_t r0, int64_t r1) { return v.present() ? v.slice(0, r0, r1) : v; };
  if (F > 0)  // fresh sequences: causal attention over their own new tokens (packed varlen)
    mla_prefill(view::insert_dim0(view::split_last(rows(q, 0, F), H)), view::insert_dim0(rows(latent, 0, F)),
                view::insert_dim0(rows(pe, 0, F)), w.kv_b, gated ? view::insert_dim0(rows(gate, 0, F)) : TensorView{},
                s.fresh_cu_t, std::nullopt, view::insert_dim0(view::split_last(rows(o, 0, F), H)), ctx);
  if (F < T)  // continuing tokens: one query each over cache rows [0, pos], the token's own row included
    mla_decode(view::split_last(rows(q, F, T), H), cache.latent, s.cont_lens_t, s.cont_slot_t, w.kv_b,
               rows(gate, F, T), std::nullopt, view::split_last(rows(o, F, T), H), ctx);
  if (s.mla_reorder) gather_rows(t.o_r, s.mla_inv, t.o, ctx);
  linear(t.o, w.o, out, beta, ctx);  // into the f32 residual
}

}  // namespace kimi::model
