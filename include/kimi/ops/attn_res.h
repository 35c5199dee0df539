// kimi/ops/attn_res.h: Block Attention Residuals (SPEC 8), token-local.
//
//   V  = [blocks_0, ..., blocks_{n-1}, partial]           n+1 candidates, each [T, d]
//   Kn = V * rsqrt(mean_d(V^2) + eps)                     RMSNorm without weight (fp32)
//   s  = sum_d Kn * (norm_w * proj_w)                      one score per candidate, no 1/sqrt(d)
//   p  = softmax over candidates;  out = sum_c p_c V_c     mixes the RAW candidates, fp32
// partial, blocks[i], out: [T, d] (f32/bf16/f16, last dim stride 1); proj_w, norm_w: [d]; eps >= 0.
// blocks may be empty (n = 0: out = partial). out may be partial or a block exactly (token-local).
#pragma once

#include <span>

#include "kimi/context.h"
#include "kimi/tensor.h"

namespace kimi {

void attn_res(TensorView partial, std::span<const TensorView> blocks, TensorView proj_w, TensorView norm_w,
              float eps, TensorView out, const Context& ctx = {});

}  // namespace kimi
