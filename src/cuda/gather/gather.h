// src/cuda/gather/gather.h: CUDA launcher of kimi/ops/gather.h (arguments already validated).
#pragma once

#include <cstdint>
#include <vector>

#include "kimi/context.h"
#include "kimi/tensor.h"

namespace kimi::cuda {

// out[n, :] = src[rows[n], :] converted to out's dtype; rows (checked, in [0, R)) are uploaded per call.
void gather_rows(TensorView src, const std::vector<int64_t>& rows, TensorView out, const Context& ctx);

}  // namespace kimi::cuda
