// src/cuda/random/random.h: the CUDA kernel of kimi/ops/random.h (arguments already validated, t contiguous).
#pragma once

#include "core/dims.h"
#include "kimi/context.h"
#include "kimi/tensor.h"

namespace kimi::cuda {

void fill_random(TensorView t, const RandomFill& r, const Context& ctx);

}  // namespace kimi::cuda
