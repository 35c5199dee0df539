// src/cpu/moe.h: CPU kernels of kimi/ops/moe.h (arguments already validated).
#pragma once

#include "kimi/context.h"
#include "kimi/ops/moe.h"

namespace kimi::cpu {

void moe_router(TensorView logits, TensorView bias, const RouterParams& p, TensorView ids, TensorView weights,
                const Context& ctx);
void moe_quantile_balance(TensorView scores, TensorView bias, int top_k, const Context& ctx);
void glu(TensorView gate, TensorView up, const GluParams& p, TensorView h, const Context& ctx);
void mlp(TensorView x, const MlpWeights& w, const GluParams& p, TensorView y, float beta, const Context& ctx);
void latent_moe(TensorView x, const LatentMoeWeights& w, const RouterParams& router, const GluParams& act,
                float norm_eps, TensorView out, TensorView ids, TensorView weights, float beta,
                const Context& ctx);

}  // namespace kimi::cpu
