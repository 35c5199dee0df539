// src/cuda/model/add_into.h: the CUDA side of src/model/add_into.h (views already checked).
#pragma once

#include "kimi/context.h"
#include "kimi/tensor.h"

namespace kimi::cuda {

// out[t, :] += y[t, :]; f32; out rows any stride (last stride 1), y contiguous [T, d].
void add_into(TensorView out, TensorView y, const Context& ctx);

}  // namespace kimi::cuda
