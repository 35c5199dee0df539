// kimi/ops/linear.h: y = x W^T, the projection every layer uses, with dense or MXFP4 weights.
//
// A Weight is what a checkpoint stores for one Linear: either a dense [out, in] matrix
// (f32/bf16/f16, rows contiguous) or MXFP4 (SPEC 10): `packed` u8 [out, in/2] plus `scale` u8
// [out, in/32]. The CPU backend converts weights to f32 a panel of rows at a time (never a
// permanent f32 copy) and multiplies with BLAS (sgemm).
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

// x: [M, in] (rows any stride, last dim stride 1); y: [M, out]; fp32 accumulate.
// beta = 0: y = x W^T; beta = 1: y += x W^T (accumulate into y, used for sums of experts).
void linear(TensorView x, const Weight& w, TensorView y, float beta = 0.f, const Context& ctx = {});

}  // namespace kimi
