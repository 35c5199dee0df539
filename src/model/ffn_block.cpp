// src/model/ffn_block.cpp: the FFN of a decoder layer (SPEC 7): a dense GLU MLP, or the (latent) MoE
//   out (+)= W_lu RMSNorm(sum_k w_k Expert_k(W_ld x)) + Shared(x)     (Kimi-Linear: no W_ld / norm / W_lu)
// with SiLU-GLU (Kimi-Linear) or SiTU-GLU (K3) everywhere. Runs on the device of x and out (its weights'
// device); the MoE's residual add is latent_moe's beta 1 (in its final write: on the device without a latent the
// expert combine kernel), or add_into after an MoE hook.
// x is in the activation dtype; the router, the expert sums and the MoE output stay f32 (latent_moe rounds
// only into its output, and the residual out is f32 so that the update is not rounded to the activation dtype).
#include <string>

#include "kimi/error.h"
#include "kimi/ops/moe.h"
#include "model/add_into.h"
#include "model/blocks.h"

namespace kimi::model {

FfnTemps ffn_temps(Workspace& ws, const Config& c, bool moe, int64_t T, float beta) {
  FfnTemps t;
  if (moe && beta != 0.f) t.y = ws.alloc(DType::f32, {T, c.hidden_size});
  return t;
}

LatentMoeWeights latent_moe_weights(const FfnWeights& w) {
  LatentMoeWeights m;
  m.router = w.router;
  m.router_bias = w.router_bias;
  m.latent_down = w.latent_down, m.latent_up = w.latent_up, m.latent_norm = w.latent_norm;
  m.experts = w.experts;
  m.shared = w.has_shared ? &w.shared : nullptr;
  return m;
}

RouterParams moe_router_params(const Config& c) {
  return {int(c.num_experts_per_token), c.moe_renormalize, c.routed_scaling_factor};
}

GluParams glu_params(const Config& c) {
  return {c.hidden_act == Activation::situ ? GluAct::situ : GluAct::silu, c.situ_beta, c.situ_linear_beta};
}

void ffn_block(const Config& c, const FfnWeights& w, TensorView x, TensorView out, float beta, Workspace& ws,
               const Context& ctx, const MoeHook& hook) {
  const GluParams act = glu_params(c);
  if (!w.moe) {
    mlp(x, w.dense, act, out, beta, ctx);
    return;
  }
  const LatentMoeWeights m = latent_moe_weights(w);
  const RouterParams router = moe_router_params(c);
  const Workspace::Scope scope(ws);
  const FfnTemps t = ffn_temps(ws, c, true, x.size(0), beta);
  if (hook) {
    if (beta != 1.f)
      throw Error("ffn_block: argument 'beta': expected 1 with an MoE hook, got " + std::to_string(beta));
    hook(x, t.y);
    add_into(out, t.y, ctx);
    return;
  }
  latent_moe(x, m, router, act, c.rms_norm_eps, out, {}, {}, beta, ctx);  // beta 1: the residual add inside
}

}  // namespace kimi::model
