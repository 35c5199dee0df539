// src/cpu/attn_res.h: CPU kernel of kimi/ops/attn_res.h (arguments already validated).
#pragma once

#include <span>

#include "kimi/context.h"
#include "kimi/tensor.h"

namespace kimi::cpu {

// Token-local: every row of out is computed from the same row of the candidates, all of which are
// loaded before the row is written (so out may be partial or a block, exactly).
void attn_res(TensorView partial, std::span<const TensorView> blocks, TensorView proj_w, TensorView norm_w, float eps,
              TensorView out, const Context& ctx);

}  // namespace kimi::cpu
