// src/cuda/sample/sample.h: CUDA launcher of kimi/ops/sample.h (arguments validated; values read only by the kernel).
#pragma once

#include "kimi/context.h"
#include "kimi/ops/sample.h"
#include "kimi/tensor.h"

namespace kimi::cuda {

// One block per row: tokens[n] as the header defines it, or -1 for a row with a bad parameter, a NaN or no finite
// maximum. Capturable (one kernel launch on ctx's stream, nothing uploaded or allocated).
void sample_tokens(TensorView logits, const SampleParams& params, TensorView tokens, const Context& ctx);

}  // namespace kimi::cuda
