// kimi/ops/linear.h: y = x W^T, the projection every layer uses, with dense or MXFP4 weights.
//
// A Weight is what a checkpoint stores for one Linear: either a dense [out, in] matrix
// (f32/bf16/f16, rows contiguous) or MXFP4 (SPEC 10): `packed` u8 [out, in/2] plus `scale` u8
// [out, in/32]. The CPU backend never keeps an f32 copy of a weight: it converts weights in registers
// inside fused dot products (weights stream from memory once), or for M > 16 with a fast BLAS converts
// a panel of rows at a time and multiplies with sgemm (docs/ops/linear.md).
#pragma once

#include <span>

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

// One projection of linear_many: y = x W^T (beta 0) or y += x W^T (beta 1), linear's contract.
struct LinearJob {
  TensorView x;
  Weight w;
  TensorView y;
  float beta = 0.f;
};

// Independent projections in one call, e.g. a block's projections of one input (KDA's q, k, v, gates and beta):
// each job gives exactly what linear(job.x, job.w, job.y, job.beta) gives, bit for bit. Every job is validated as
// linear validates its arguments (errors name jobs[i].x, jobs[i].w.w, ...) before anything runs; all jobs are on
// one device, and no job's y shares memory with another job's x or y (the jobs run in any order or at once).
// On a GPU the decode-sized jobs (those that linear streams through its GEMV kernel: M <= 16) with the same M,
// weight format and x dtype run as ONE launch (up to 8 per launch); the others run one by one.
void linear_many(std::span<const LinearJob> jobs, const Context& ctx = {});

}  // namespace kimi
