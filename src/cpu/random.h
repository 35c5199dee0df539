// src/cpu/random.h: CPU kernel of kimi/ops/random.h (arguments already validated, t contiguous).
#pragma once

#include "core/dims.h"
#include "kimi/context.h"
#include "kimi/tensor.h"

namespace kimi::cpu {

void fill_random(TensorView t, const RandomFill& r, const Context& ctx);

}  // namespace kimi::cpu
