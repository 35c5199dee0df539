// src/cuda/norm/norm.h: CUDA launchers of kimi/ops/norm.h (arguments already validated).
#pragma once

#include "kimi/context.h"
#include "kimi/tensor.h"

namespace kimi::cuda {

void rms_norm(TensorView x, TensorView w, float eps, TensorView y, const Context& ctx);
void gated_rms_norm(TensorView o, TensorView z, TensorView w, float eps, TensorView y, const Context& ctx);

}  // namespace kimi::cuda
