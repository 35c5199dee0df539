// src/model/add_into.h: out[t, :] += y[t, :] for the model's f32 [T, d] activations, on their device (the
// residual add of a block whose operator has no accumulate form: the MoE FFN). out: rows any stride, last
// stride 1; y: contiguous [T, d]; both f32 on one device. An internal helper of the runtime, not an op.
#pragma once

#include "kimi/context.h"
#include "kimi/tensor.h"

namespace kimi::model {

void add_into(TensorView out, TensorView y, const Context& ctx);

}  // namespace kimi::model
