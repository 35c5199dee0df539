// kimi/ops/kda.h: Kimi Delta Attention (SPEC 5): gate, beta, recurrent and chunkwise forward.
//
// Per head, state S in R^{K x V} (fp32), per token t:
//   S <- Diag(exp(g_t)) S                 decay first (g_t in R^K, log space, g <= 0)
//   e  = v_t - S^T k_t                     prediction from the decayed state
//   S <- S + beta_t k_t e^T
//   o_t = S^T (scale * q_t)                read-out from the updated state
// with q, k optionally L2-normalized over K first (eps 1e-6), scale default K^-0.5.
//
// Layouts (FLA's): q, k [B, T, H, K]; v [B, T, H, V]; g [B, T, H, K]; beta [B, T, H]; o [B, T, H, V].
// Packed variable-length batches: B = 1 and cu_seqlens i32/i64 [N+1] (offsets, 0 = first, last = T).
// Last dim of q, k, v, g, o has stride 1; other dims any stride. K, V in [1, 256].
// States fp32, [N, H, K, V] (StateLayout::kv, FLA) or [N, H, V, K] (StateLayout::vk, FlashKDA and
// serving engines); N = B without cu_seqlens.
#pragma once

#include <optional>

#include "kimi/context.h"
#include "kimi/tensor.h"

namespace kimi {

inline constexpr int64_t kKdaMaxHeadDim = 256;  // K, V in [1, kKdaMaxHeadDim] (every KDA operator)

enum class StateLayout : uint8_t { kv, vk };

enum class GateForm : uint8_t {
  bounded,   // K3:          g = lower_bound * sigmoid(exp(A_log[h]) * (f + dt_bias))   in (lower_bound, 0)
  softplus,  // Kimi-Linear: g = -exp(A_log[h]) * softplus(f + dt_bias)                in (-inf, 0)
};

// The fused gate: turns the raw gate projection f = W_fb W_fa x into log-decay g.
struct KdaGate {
  GateForm form = GateForm::softplus;
  TensorView A_log;    // f32 [H] (checkpoints store [H], [1,1,H,1] or a zero-padded [>=H]: pass the first H)
  TensorView dt_bias;  // f32 [H*K] (or [H, K])
  float lower_bound = -5.f;  // bounded form only
};

// g = gate(f): f [..., H, K] raw (f32/bf16/f16); g [..., H, K] f32 (or other float dtype).
void kda_gate(TensorView f, const KdaGate& gate, TensorView g, const Context& ctx = {});

// beta = sigmoid(b): b [..., H] any float dtype; beta [..., H].
void kda_beta(TensorView b, TensorView beta, const Context& ctx = {});

struct KdaArgs {
  TensorView q, k, v;  // [B, T, H, K], [B, T, H, K], [B, T, H, V]; f32/bf16/f16
  TensorView g;        // [B, T, H, K]: log decay, or the RAW gate input when `gate` is set
  TensorView beta;     // [B, T, H]: beta, or its RAW logit when beta_sigmoid_in_kernel
  std::optional<KdaGate> gate;           // fused gate (use_gate_in_kernel)
  bool beta_sigmoid_in_kernel = false;
  bool qk_l2norm_in_kernel = false;
  std::optional<float> scale;            // default K^-0.5
  TensorView initial_state;              // optional f32 [N, H, K, V] / [N, H, V, K]
  TensorView final_state;                // optional output, same layout; may alias initial_state
  StateLayout state_layout = StateLayout::kv;
  TensorView cu_seqlens;                 // optional i32/i64 [N+1]
  // Optional state pool indexing, i32/i64 [N] on the host, distinct: sequence n reads
  // initial_state[state_slots[n]] and writes final_state[state_slots[n]], the states being pools
  // [N_pool, H, K, V] / [N_pool, H, V, K] (serving engines' per-sequence slots). Other rows are untouched.
  // CPU and the CUDA recurrent kernels (the CUDA chunk kernels reject it for now).
  TensorView state_slots;
  TensorView o;                          // output [B, T, H, V]
};

// Token-by-token recurrence (decode and the reference).
void kda_recurrent_fwd(const KdaArgs& args, const Context& ctx = {});

// Chunkwise form (SPEC 5.1, UT transform), chunk_size tokens per chunk (default 64). Same result
// as kda_recurrent_fwd up to rounding.
void kda_chunk_fwd(const KdaArgs& args, int chunk_size = 64, const Context& ctx = {});

}  // namespace kimi
