// kimi/ops/norm.h: RMSNorm, fused residual-add + RMSNorm, per-head gated RMSNorm, L2 norm (SPEC 3).
//
// All norms reduce over the LAST dimension D, which must have stride 1; the leading dimensions are
// any rows with any strides. x, y: f32/bf16/f16 (y may be a different float dtype than x); weights
// f32/bf16/f16 [D]. Compute is fp32.
#pragma once

#include "kimi/context.h"
#include "kimi/tensor.h"

namespace kimi {

// y = w * cast_x(x * rsqrt(mean(x^2) + eps))
//   the normalized value is rounded to x's dtype before the weight multiplies it (HF semantics).
// x: [..., D]; w: [D]; y: like x.
void rms_norm(TensorView x, TensorView w, float eps, TensorView y, const Context& ctx = {});

// sum = x + residual; y = rms_norm(sum, w, eps). sum is rounded to its dtype before the norm.
// x, residual, sum, y: [..., D] (same shape); w: [D]. sum may alias x or residual.
void add_rms_norm(TensorView x, TensorView residual, TensorView w, float eps, TensorView sum, TensorView y,
                  const Context& ctx = {});

// Per-head gated RMSNorm (KDA output): y[.., h, :] = rms_norm(o[.., h, :], w, eps) * sigmoid(z[.., h, :])
// o, z, y: [..., H, D]; w: [D] (shared by all heads). z may be absent (then no gate).
// NOTE: unlike rms_norm, the normalized value is not rounded before the weight (FLA's fused
//   kernel keeps fp32 throughout).
void gated_rms_norm(TensorView o, TensorView z, TensorView w, float eps, TensorView y,
                    const Context& ctx = {});

// y = x / sqrt(sum(x^2) + eps), eps default 1e-6 (KDA q/k).
void l2_norm(TensorView x, TensorView y, float eps = 1e-6f, const Context& ctx = {});

}  // namespace kimi
