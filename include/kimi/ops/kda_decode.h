// kimi/ops/kda_decode.h: one fused KDA decode step for a batch of sequences (SPEC 3-5): everything a KDA
// layer does between its input projections and its output projection, for one new token per sequence.
//
// Sequence n uses row s = slots[n] of the conv-cache and state pools. Per head h (K key, V value channels):
//   q, k, v = SiLU(conv(x_q, x_k, x_v; cache_{q,k,v}[s]))   depthwise causal conv, caches shift in place
//   q_h = l2norm(q_h) * scale,  k_h = l2norm(k_h)            (eps 1e-6; scale default K^-0.5)
//   g_h = gate(f_h; A_log[h], dt_bias)                       bounded or softplus form (kimi/ops/kda.h)
//   beta_h = sigmoid(b_h)
//   S = state[s, h]:  S <- Diag(exp(g_h)) S;  S <- S + beta_h k_h (v_h - S^T k_h)^T;  o_h = S^T q_h   (in place)
//   y_h = RMSNorm(o_h; o_norm, norm_eps) * sigmoid(z_h)      (no gate when z is absent)
//
// Shapes (P = H*K, Pv = H*V): x_q, x_k, f [N, P]; x_v, z, y [N, Pv]; b [N, H]: f32/bf16/f16, last dim stride 1.
// conv_q, conv_k [P, W] or [P, 1, W], conv_v [Pv, W] or [Pv, 1, W]; cache_q, cache_k [S, P, W-1],
// cache_v [S, Pv, W-1] (kimi/ops/conv.h's cache layout); o_norm [V]; gate.A_log f32 [H], gate.dt_bias f32 [P].
// state f32 [S, H, K, V] (kv) or [S, H, V, K] (vk), contiguous. y must not overlap the inputs. Everything is
// validated before any cache or state changes.
// slots i32/i64 [N] (absent: row n), either
//   - on the host: validated (each in [0, S), distinct), then passed to the kernel by value (N <= 256; larger N
//     is uploaded, which cannot run inside CUDA graph capture), or
//   - on the tensors' CUDA device (the form to capture in a CUDA graph and replay with new slot values): only
//     dtype, shape, device and no overlap with y and the pools are checked. CONTRACT: the values must be
//     distinct and in [0, S). The kernel never reads or writes a pool row outside [0, S): a sequence whose slot
//     is out of range is skipped (its cache and state rows untouched) and its y rows are set to NaN so that the
//     error shows; duplicate slots race (undefined results in those rows).
// On CUDA the step is one kernel launch with no host synchronization or allocation (host slots of N > 256
// excepted), so it can be captured in a CUDA graph.
// The result equals short_conv_update x3 + kda_recurrent_fwd (T = 1) + gated_rms_norm on the same inputs.
#pragma once

#include <optional>

#include "kimi/context.h"
#include "kimi/ops/kda.h"
#include "kimi/tensor.h"

namespace kimi {

struct KdaDecodeArgs {
  TensorView x_q, x_k, x_v;           // raw projections, before the convs
  TensorView conv_q, conv_k, conv_v;  // conv weights
  TensorView cache_q, cache_k, cache_v;  // conv cache pools, updated in place
  TensorView f;                       // raw gate input
  KdaGate gate;
  TensorView b;                       // raw beta logits
  TensorView z;                       // raw output gate, optional
  TensorView o_norm;                  // per-head RMSNorm weight [V]
  float norm_eps = 1e-5f;
  std::optional<float> scale;
  TensorView state;                   // pool, updated in place
  StateLayout state_layout = StateLayout::kv;
  TensorView slots;                   // optional i32/i64 [N], host or device (see above)
  TensorView y;                       // output [N, Pv]
};

void kda_decode_step(const KdaDecodeArgs& a, const Context& ctx = {});

}  // namespace kimi
