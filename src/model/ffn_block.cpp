// src/model/ffn_block.cpp: the FFN of a decoder layer (SPEC 7): a dense GLU MLP, or the (latent) MoE
//   out (+)= W_lu RMSNorm(sum_k w_k Expert_k(W_ld x)) + Shared(x)     (Kimi-Linear: no W_ld / norm / W_lu)
// with SiLU-GLU (Kimi-Linear) or SiTU-GLU (K3) everywhere.
#include "kimi/ops/moe.h"
#include "model/blocks.h"

namespace kimi::model {

void ffn_block(const Config& c, const FfnWeights& w, TensorView x, TensorView out, float beta, const Context& ctx) {
  const GluParams act{c.hidden_act == Activation::situ ? GluAct::situ : GluAct::silu, c.situ_beta, c.situ_linear_beta};
  if (!w.moe) {
    mlp(x, w.dense, act, out, beta, ctx);
    return;
  }
  LatentMoeWeights m;
  m.router = w.router;
  m.router_bias = w.router_bias;
  m.latent_down = w.latent_down, m.latent_up = w.latent_up, m.latent_norm = w.latent_norm;
  m.experts = w.experts;
  m.shared = w.has_shared ? &w.shared : nullptr;
  const RouterParams router{int(c.num_experts_per_token), c.moe_renormalize, c.routed_scaling_factor};
  if (beta == 0.f) {
    latent_moe(x, m, router, act, c.rms_norm_eps, out, {}, {}, ctx);
    return;
  }
  Tensor y(DType::f32, {x.size(0), x.size(1)});
  latent_moe(x, m, router, act, c.rms_norm_eps, y, {}, {}, ctx);
  float* o = static_cast<float*>(out.data);
  const float* p = y.data_as<float>();
  for (int64_t t = 0; t < x.size(0); ++t)
    for (int64_t i = 0; i < x.size(1); ++i) o[t * out.stride(0) + i] += p[t * x.size(1) + i];
}

}  // namespace kimi::model
