// src/cuda/conv/conv.h: CUDA launchers of kimi/ops/conv.h (arguments already validated).
#pragma once

#include <vector>

#include "kimi/context.h"
#include "kimi/ops/conv.h"
#include "kimi/tensor.h"

namespace kimi::cuda {

// short_conv_update: one token per sequence; `rows[n]` is sequence n's cache row (host values).
void short_conv_update(TensorView x, TensorView w, TensorView cache, const std::vector<int64_t>& rows,
                       ConvActivation act, TensorView y, const Context& ctx);

}  // namespace kimi::cuda
