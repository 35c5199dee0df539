// src/cpu/sample.h: CPU kernel of kimi/ops/sample.h (arguments and values already validated).
#pragma once

#include <cstdint>

#include "kimi/context.h"
#include "kimi/ops/sample.h"
#include "kimi/tensor.h"

namespace kimi::cpu {

// One row's parameters (kimi/ops/sample.h), the draw already made from (seed, sequence, step).
struct SampleRow {
  float temperature = 0.f;
  int64_t top_k = 0;
  float top_p = 1.f;
  uint64_t draw = 0;
};

// The token of one row x[0, V) (no NaN, finite maximum): the definition of kimi/ops/sample.h, written plainly
// (sorts where the definition orders), the reference the CUDA kernel is tested against.
int32_t sample_row(const float* x, int64_t V, const SampleRow& p);

// tokens[n] = sample_row(logits row n, row n's parameters), rows in parallel.
void sample_tokens(TensorView logits, const SampleParams& params, TensorView tokens, const Context& ctx);

}  // namespace kimi::cpu
