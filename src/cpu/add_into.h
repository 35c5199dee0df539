// src/cpu/add_into.h: the CPU kernel of the runtime's residual add (src/model/add_into.h; views already checked).
#pragma once

#include "kimi/context.h"
#include "kimi/tensor.h"

namespace kimi::cpu {

// out[t, :] += y[t, :]; f32; out rows any stride (last stride 1), y contiguous [T, d].
void add_into(TensorView out, TensorView y, const Context& ctx);

}  // namespace kimi::cpu
