// src/cuda/norm/norm.h: CUDA launchers of kimi/ops/norm.h (arguments already validated).
#pragma once

#include "kimi/context.h"
#include "kimi/tensor.h"

namespace kimi::cuda {

void rms_norm(TensorView x, TensorView w, float eps, TensorView y, const Context& ctx);
void gated_rms_norm(TensorView o, TensorView z, TensorView w, float eps, TensorView y, const Context& ctx);
void add_rms_norm(TensorView x, TensorView residual, TensorView w, float eps, TensorView sum, TensorView y,
                  const Context& ctx);
void l2_norm(TensorView x, TensorView y, float eps, const Context& ctx);

}  // namespace kimi::cuda
