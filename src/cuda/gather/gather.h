// src/cuda/gather/gather.h: CUDA launcher of kimi/ops/gather.h (arguments already validated).
#pragma once

#include <cstdint>

#include "core/index.h"
#include "kimi/context.h"
#include "kimi/tensor.h"

namespace kimi::cuda {

// out[n, :] = src[rows[n], :] converted to out's dtype; host rows (checked, in [0, R)) are uploaded per call, device
// rows read by the kernel (a row outside [0, R) gives a NaN output row).
void gather_rows(TensorView src, const Index& rows, TensorView out, const Context& ctx);

}  // namespace kimi::cuda
