// kimi/ops/mxfp4.h: MXFP4 weights (SPEC 10, compressed-tensors `mxfp4-pack-quantized`).
//
// packed u8 [O, I/2]: two E2M1 codes per byte, LOW nibble = even input column, high = odd.
//   code bit 3 = sign; bits 0-2 index magnitudes {0, 0.5, 1, 1.5, 2, 3, 4, 6}.
// scale u8 [O, I/32]: E8M0, value 2^(e - 127) per 32 consecutive input columns (e = 255 is NaN).
// w[o, i] = mag(code(o, i)) * sign * 2^(scale[o, i/32] - 127).   I must be a multiple of 32.
#pragma once

#include "kimi/context.h"
#include "kimi/tensor.h"

namespace kimi {

// w: f32/bf16/f16 [O, I] <- (packed, scale).
void mxfp4_dequant(TensorView packed, TensorView scale, TensorView w, const Context& ctx = {});

// (packed, scale) <- w f32/bf16/f16 [O, I]: per block of 32, e = clamp(floor(log2(amax)) - 2 + 127, 0, 254)
// (so that amax / 2^(e-127) lands in [4, 8) and rounds onto the top magnitude 6 or below), then each
// value divided by the scale rounds to the nearest E2M1 magnitude (ties to the even code), saturating at 6.
// An all-zero block gets e = 0. For tests and tools; not a training quantizer.
void mxfp4_quant(TensorView w, TensorView packed, TensorView scale, const Context& ctx = {});

}  // namespace kimi
