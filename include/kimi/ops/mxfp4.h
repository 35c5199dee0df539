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

// w: f32/bf16/f16 [O, I] <- (packed, scale). Exact whenever the value fits w's dtype: f32 and bf16 hold
// every code for e <= 252 (at e = 253 magnitudes >= 4, at e = 254 magnitudes >= 2 reach 2^128 and become
// Inf), f16 every code for 104 <= e <= 140. Code 8 (sign, magnitude 0) gives -0; e = 255 gives NaN.
// Rows of w must not overlap. The CPU decoder is cpu::mxfp4_decode_row; the linear kernels decode
// bit for bit the same values.
void mxfp4_dequant(TensorView packed, TensorView scale, TensorView w, const Context& ctx = {});

// (packed, scale) <- w f32/bf16/f16 [O, I]: per block of 32, e = clamp(floor(log2(amax)) - 2 + 127, 0, 254)
// (so that amax / 2^(e-127) lands in [4, 8) and rounds onto the top magnitude 6 or below), then each
// value divided by the scale rounds to the nearest E2M1 magnitude (ties to the even code), saturating at 6.
// An all-zero block gets e = 0. The code's sign bit is the value's sign bit (-0 and negative values that
// round to 0 give code 8). A block holding NaN or Inf gets the E8M0 NaN scale e = 255 and codes 0 (the
// block dequantizes to NaN; other blocks are unaffected): nothing throws on data. Error bound, exact
// round trips: docs/ops/mxfp4.md. Output rows must not overlap. For tests and tools; not a training
// quantizer.
void mxfp4_quant(TensorView w, TensorView packed, TensorView scale, const Context& ctx = {});

}  // namespace kimi
