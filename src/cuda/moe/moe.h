// src/cuda/moe/moe.h: CUDA launchers of kimi/ops/moe.h (arguments already validated by src/ops/moe.cpp).
// moe_quantile_balance has no CUDA version: it needs a per-token (K+1)-th largest score and per-expert
// order statistics over all T tokens (sorts / selections with fp64 statistics); docs/ops/moe.md.
#pragma once

#include "kimi/context.h"
#include "kimi/ops/moe.h"
#include "kimi/tensor.h"

namespace kimi::cuda {

void moe_router(TensorView logits, TensorView bias, const RouterParams& p, TensorView ids, TensorView weights,
                const Context& ctx);
void glu(TensorView gate, TensorView up, const GluParams& p, TensorView h, const Context& ctx);
void mlp(TensorView x, const MlpWeights& w, const GluParams& p, TensorView y, float beta, const Context& ctx);
// Decode shapes (T * top_k <= 16 E) run without a host sync and capture in a CUDA graph when the experts are
// stacked; prefill shapes copy the expert offsets to the host once (src/cuda/moe/latent_moe.cu, experts.h).
void latent_moe(TensorView x, const LatentMoeWeights& w, const RouterParams& router, const GluParams& act,
                float norm_eps, TensorView out, TensorView ids, TensorView weights, float beta,
                const Context& ctx);

}  // namespace kimi::cuda
