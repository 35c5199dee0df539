// src/cuda/register.h: the CUDA backend's registration (cuda::register_ops, src/core/registry.h), one function
// per family whose kernel choice needs more than a one-line entry (the rest: src/cuda/register.cu).
#pragma once

#include "core/registry.h"

namespace kimi::cuda {

// kimi/ops/kda.h and kimi/ops/kda_decode.h, with the rule that picks the chunk or the recurrent kernels
// (src/cuda/kda/register.cu).
void register_kda_ops(Registry& r);

}  // namespace kimi::cuda
