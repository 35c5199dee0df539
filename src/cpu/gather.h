// src/cpu/gather.h: CPU kernel of kimi/ops/gather.h (arguments already validated).
#pragma once

#include <cstdint>
#include <vector>

#include "kimi/context.h"
#include "kimi/tensor.h"

namespace kimi::cpu {

// out[n, :] = src[rows[n], :] converted to out's dtype.
void gather_rows(TensorView src, const std::vector<int64_t>& rows, TensorView out, const Context& ctx);

}  // namespace kimi::cpu
