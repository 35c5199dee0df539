// kimi/ops/mla.h: gated Multi-head Latent Attention, NoPE (SPEC 6), the attention core after the
// q and kv_a projections.
//
// Per token: latent c = RMSNorm_kva(c_raw) [R] (R = kv_lora), k_pe [P] (P = qk_rope, shared by
// all heads, NOT rotated), q_h = [q_nope_h (Dn) | q_pe_h (P)].
//   [k_nope_h | v_h] = W_kvb[h] c          W_kvb: [H*(Dn+Dv), R], head h owns rows h*(Dn+Dv) ..
//                                          (first Dn rows: key part W_kvb_k[h], next Dv: value part W_kvb_v[h])
//   k_h = [k_nope_h | k_pe]
//   a   = causal softmax_j(q_h . k_h,j * softmax_scale)        fp32; default scale (Dn+P)^-0.5
//   o_h = sum_j a_j v_h,j ;  if gate: o_h *= sigmoid(gate_h)     (K3 output gate, raw W_g x)
//
// Latent cache: [N, L, R + P] per layer, token j of sequence n at [n, j, :] = [c_j | k_pe_j].
//
// Sizes are not passed separately: every one is read off the tensors and cross-checked.
//   H  = q.size(-2)                       R  = latent.size(-1) (prefill) / w_kvb columns (decode)
//   P  = k_pe.size(-1) (prefill) / cache.size(-1) - R (decode)
//   Dn = q.size(-1) - P (>= 1)            Dv = o.size(-1) (>= 1)
//   w_kvb must then be [H*(Dn+Dv), R]; a mismatch names the sizes and where each came from.
//
// Dtypes: float tensors are f32/bf16/f16 (any mix); compute is fp32 (softmax max-subtracted, sums
// in fp32 or better). Index tensors (cu_seqlens, start, slots, lens) are i32 or i64, on the host.
// Layouts: the last dimension of every float tensor has stride 1; other strides are free. w_kvb is a
// dense weight (MXFP4 is rejected). Outputs must not alias inputs.
#pragma once

#include <optional>

#include "kimi/context.h"
#include "kimi/tensor.h"
#include "kimi/ops/linear.h"

namespace kimi {

// Causal prefill, explicit form (k_nope and v materialized from the latent).
// q [B, T, H, Dn+P]; latent [B, T, R]; k_pe [B, T, P]; w_kvb dense [H*(Dn+Dv), R];
// gate optional [B, T, H*Dv] (raw, sigmoid applied here); o [B, T, H, Dv].
// Packed varlen: B = 1 with cu_seqlens i32/i64 [N+1]; attention never crosses sequences.
void mla_prefill(TensorView q, TensorView latent, TensorView k_pe, const Weight& w_kvb, TensorView gate,
                 TensorView cu_seqlens, std::optional<float> softmax_scale, TensorView o,
                 const Context& ctx = {});

// Writes T tokens into the latent cache: cache[slots[n], start[n] + t, :] = [latent[n, t] | k_pe[n, t]].
// latent [N, T, R]; k_pe [N, T, P]; cache [Nc, L, R+P]; start i32 [N]; slots optional i32 [N]
// (row n goes to cache row slots[n], default n; in [0, Nc)). 0 <= start[n], start[n] + T <= L.
// Every cache row is written at most once: a slot may repeat only with disjoint ranges [start, start + T)
// (a packed varlen batch is written as N = total tokens rows of T = 1, each with its slot and position).
// On CUDA, start and slots may instead both be i32/i64 [N] tensors on the cache's device, read only by the kernel (the
// form a CUDA graph captures): their values are not checked; a sequence whose slot or start falls outside the cache
// is not written.
void mla_cache_write(TensorView latent, TensorView k_pe, TensorView cache, TensorView start,
                     TensorView slots, const Context& ctx = {});

// Decode, absorbed form: one query token per sequence attends to cache rows [0, lens[n]) of cache
// row slots[n] (the query is the token at position lens[n] - 1, already written to the cache).
//   q_lat_h = W_kvb_k[h]^T q_nope_h  [R];  score_j = (q_lat_h . c_j + q_pe_h . k_pe_j) * scale
//   o_h = W_kvb_v[h] (sum_j a_j c_j)  [Dv]
// q [N, H, Dn+P]; cache [Nc, L, R+P]; lens i32 [N] (in [1, L]); slots optional i32 [N] (in [0, Nc),
// default n); w_kvb dense [H*(Dn+Dv), R]; gate optional [N, H*Dv]; o [N, H, Dv].
// On CUDA, lens and slots may instead both be i32/i64 [N] tensors on q's device, read only by the kernels (capturable
// in a CUDA graph): their values are not checked; a sequence with a length outside [1, L] or a slot outside [0, Nc)
// gets NaN outputs.
void mla_decode(TensorView q, TensorView cache, TensorView lens, TensorView slots, const Weight& w_kvb,
                TensorView gate, std::optional<float> softmax_scale, TensorView o, const Context& ctx = {});

}  // namespace kimi
