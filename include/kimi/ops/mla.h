// kimi/ops/mla.h: gated Multi-head Latent Attention, NoPE (SPEC 6), the attention core after the
// q and kv_a projections.
//
// Per token: latent c = RMSNorm_kva(c_raw) [R] (R = kv_lora), k_pe [P] (P = qk_rope, shared by
// all heads, NOT rotated), q_h = [q_nope_h (Dn) | q_pe_h (P)].
//   [k_nope_h | v_h] = W_kvb[h] c          W_kvb: [H*(Dn+Dv), R], head h owns rows h*(Dn+Dv) ..
//   k_h = [k_nope_h | k_pe]
//   a   = causal softmax_j(q_h . k_h,j * softmax_scale)        fp32; default scale (Dn+P)^-0.5
//   o_h = sum_j a_j v_h,j ;  if gate: o_h *= sigmoid(gate_h)     (K3 output gate, raw W_g x)
//
// Latent cache: [N, L, R + P] per layer, token j of sequence n at [n, j, :] = [c_j | k_pe_j].
#pragma once

#include <optional>

#include "kimi/context.h"
#include "kimi/tensor.h"
#include "kimi/ops/linear.h"

namespace kimi {

struct MlaShape {
  int64_t heads = 0, kv_lora = 0, qk_nope = 0, qk_rope = 0, v_dim = 0;
};

// Causal prefill, explicit form (k_nope and v materialized from the latent).
// q [B, T, H, Dn+P]; latent [B, T, R]; k_pe [B, T, P]; w_kvb dense [H*(Dn+Dv), R];
// gate optional [B, T, H*Dv] (raw, sigmoid applied here); o [B, T, H, Dv].
// Packed varlen: B = 1 with cu_seqlens i32/i64 [N+1]; attention never crosses sequences.
void mla_prefill(TensorView q, TensorView latent, TensorView k_pe, const Weight& w_kvb, TensorView gate,
                 TensorView cu_seqlens, std::optional<float> softmax_scale, TensorView o,
                 const Context& ctx = {});

// Writes T tokens into the latent cache: cache[n, start[n] + t, :] = [latent[n, t] | k_pe[n, t]].
// latent [N, T, R]; k_pe [N, T, P]; cache [Nc, L, R+P]; start i32 [N]; slots optional i32 [N]
// (row n goes to cache row slots[n], default n). start[n] + T <= L is checked.
void mla_cache_write(TensorView latent, TensorView k_pe, TensorView cache, TensorView start,
                     TensorView slots, const Context& ctx = {});

// Decode, absorbed form: one query token per sequence attends to cache rows [0, lens[n]).
//   q_lat_h = W_kvb_k[h]^T q_nope_h  [R];  score_j = (q_lat_h . c_j + q_pe_h . k_pe_j) * scale
//   o_h = W_kvb_v[h] (sum_j a_j c_j)  [Dv]
// q [N, H, Dn+P]; cache [Nc, L, R+P]; lens i32 [N] (>= 1); slots optional i32 [N];
// gate optional [N, H*Dv]; o [N, H, Dv].
void mla_decode(TensorView q, TensorView cache, TensorView lens, TensorView slots, const Weight& w_kvb,
                const MlaShape& shape, TensorView gate, std::optional<float> softmax_scale, TensorView o,
                const Context& ctx = {});

}  // namespace kimi
