// kimi/ops/moe.h: the sigmoid router, Quantile Balancing, GLU activations, dense MLP and the
// latent MoE block (SPEC 7).
#pragma once

#include <span>

#include "kimi/context.h"
#include "kimi/tensor.h"
#include "kimi/ops/linear.h"

namespace kimi {

// Router (inference): s = sigmoid(logits) (fp32); sel = top-k of (s + bias) (ties: lower index first);
// weights = s[sel] (UNBIASED), if renormalize: w / (sum w + 1e-20); then w *= scaling.
// logits [T, E] f32/bf16/f16; bias f32 [E] (optional); ids i32 [T, K] (descending biased score);
// weights f32 [T, K].
struct RouterParams {
  int top_k = 1;
  bool renormalize = true;
  float scaling = 1.f;
};
void moe_router(TensorView logits, TensorView bias, const RouterParams& p, TensorView ids, TensorView weights,
                const Context& ctx = {});

// Quantile Balancing bias update (training-time, no auxiliary loss), on a batch of T tokens:
//   c_i   = token i's (K+1)-th largest biased score s_ij + b_j
//   m_ij  = s_ij + b_j - c_i
//   delta_j = the (1 - K/E) quantile of expert j's margins {m_ij}_i  (the value that exactly
//             q = K*T/E of them exceed; linear interpolation between order statistics):
//             with m_(0) <= ... <= m_(T-1) sorted ascending, h = (1 - K/E) T - 1/2 = T - q - 1/2
//             clamped to [0, T-1], delta_j = m_(floor h) + frac(h) (m_(floor h + 1) - m_(floor h))
//             (Hazen's definition: for integer q, the midpoint of m_(T-q-1) and m_(T-q))
//   b_j  <- b_j - delta_j, then b <- b - mean(b)  (centred)
// scores f32 [T, E] (sigmoid probabilities, unbiased; finite); bias f32 [E] (finite) updated in place.
// Requires 1 <= K < E. Statistics in fp64. T = 0 leaves the bias unchanged.
void moe_quantile_balance(TensorView scores, TensorView bias, int top_k, const Context& ctx = {});

enum class GluAct : uint8_t { silu, situ };
struct GluParams {
  GluAct act = GluAct::silu;
  float situ_beta = 4.f;          // SiTU: beta * tanh(gate / beta) * sigmoid(gate)
  float situ_linear_beta = 25.f;  // lbeta * tanh(up / lbeta); <= 0 means identity on up
};

// h = act(gate) * up'   (SiLU-GLU: SiLU(gate) * up; SiTU-GLU: SPEC 7). gate, up, h: [..., I], f32/bf16/f16,
// last dim stride 1, any leading strides; fp32 compute; h may alias gate or up. SiTU needs situ_beta > 0.
void glu(TensorView gate, TensorView up, const GluParams& p, TensorView h, const Context& ctx = {});

struct MlpWeights {
  Weight gate, up, down;  // [I, d], [I, d], [d, I]  (w1, w3, w2 for experts)
};

// y = down(act(gate x) * up x): x [T, d]; y [T, d]. beta = 1 accumulates into y. The gate/up
// projections and the activation stay f32 (no rounding to x's dtype in between); y may alias x.
void mlp(TensorView x, const MlpWeights& w, const GluParams& p, TensorView y, float beta = 0.f,
         const Context& ctx = {});

struct LatentMoeWeights {
  Weight router;                       // [E, d]
  TensorView router_bias;              // f32 [E] (e_score_correction_bias), optional
  Weight latent_down;                  // [Dl, d]; absent (w not present) when not latent (48B)
  TensorView latent_norm;              // [Dl] RMSNorm weight; absent when latent_moe_use_norm is off
  Weight latent_up;                    // [d, Dl]; absent when not latent
  std::span<const MlpWeights> experts; // E experts on the latent width (dense or MXFP4 weights)
  const MlpWeights* shared = nullptr;  // one MLP on the full x (num_shared * moe_intermediate), optional
};

// out = up(RMSNorm(sum_k w_k Expert_{sel_k}(down x))) + Shared(x) (+ out when beta = 1)
//                                                     (SPEC 7; 48B: no down/norm/up)
// x [T, d]; out [T, d]; ids/weights optional outputs i32/f32 [T, K] (the routing used); beta 0 or 1.
// Router logits, the latent, the weighted expert sum, the norm and the shared MLP are all f32; out is
// rounded once at the end, after the f32 sum with out's old value when beta = 1 (the residual add, bit for bit
// an f32 out += y of the beta-0 result kept f32); out may alias x only with beta 0. latent_down and latent_up
// come together; latent_norm requires them. Each expert runs once over the rows routed to it.
void latent_moe(TensorView x, const LatentMoeWeights& w, const RouterParams& router, const GluParams& act,
                float norm_eps, TensorView out, TensorView ids = {}, TensorView weights = {}, float beta = 0.f,
                const Context& ctx = {});

}  // namespace kimi
