// kimi/ops/linear.h: y = x W^T, the projection every layer uses, with dense or MXFP4 weights.
//
// A Weight is what a checkpoint stores for one Linear: either a dense [out, in] matrix
// (f32/bf16/f16, rows contiguous) or MXFP4 (SPEC 10): `packed` u8 [out, in/2] plus `scale` u8
// [out, in/32]. The CPU backend never keeps an f32 copy of a weight: it converts weights in registers
// inside fused dot products (weights stream from memory once), or for M > 16 with a fast BLAS converts
// a panel of rows at a time and multiplies with sgemm (docs/ops/linear.md).
#pragma once

#include "kimi/context.h"
#include "kimi/tensor.h"

namespace kimi {

struct Weight {
  TensorView w;      // dense [out, in], or MXFP4 packed u8 [out, in/2]
  TensorView scale;  // absent for dense; MXFP4 E8M0 u8 [out, in/32]
  bool is_mxfp4() const { return scale.present(); }
  int64_t out_features() const { return w.size(0); }
  int64_t in_features() const { return is_mxfp4() ? w.size(1) * 2 : w.size(1); }
};

// x: [M, in] (rows any stride, last dim stride 1); y: [M, out] (rows must not overlap: row stride >= out
// when M > 1; y shares no memory with x); weight rows any stride, last dim stride 1. fp32 accumulate.
// beta = 0: y = x W^T (y is never read: NaN in y does not leak); beta = 1: y += x W^T (accumulate into
// y, used for sums of experts). in = 0 gives y = 0 (beta 0) or leaves y unchanged (beta 1).
void linear(TensorView x, const Weight& w, TensorView y, float beta = 0.f, const Context& ctx = {});

}  // namespace kimi
