// src/cuda/attn_res/attn_res.h: CUDA launcher of kimi::attn_res (kimi/ops/attn_res.h, SPEC 8); arguments already
// validated by src/ops/attn_res.cpp.
#pragma once

#include <span>

#include "kimi/context.h"
#include "kimi/tensor.h"

namespace kimi::cuda {

void attn_res(TensorView partial, std::span<const TensorView> blocks, TensorView proj_w, TensorView norm_w,
              float eps, TensorView out, const Context& ctx);

}  // namespace kimi::cuda
