// src/cpu/mxfp4.h: CPU kernels of kimi/ops/mxfp4.h (arguments already validated).
#pragma once

#include <cstdint>

#include "kimi/context.h"
#include "kimi/tensor.h"

namespace kimi::cpu {

void mxfp4_dequant(TensorView packed, TensorView scale, TensorView w, const Context& ctx);
void mxfp4_quant(TensorView w, TensorView packed, TensorView scale, const Context& ctx);

// One block of 32 f32 values -> 16 packed bytes (low nibble = even column), returns the E8M0 scale.
uint8_t mxfp4_quant_block(const float* v, uint8_t* packed);

}  // namespace kimi::cpu
