// src/cuda/linear/linear.h: CUDA launchers of kimi/ops/linear.h and kimi/ops/mxfp4.h (arguments already
// validated by src/ops; also called by the MoE launchers). How the projection picks its kernel and why:
// docs/ops/linear.md.
#pragma once

#include <span>

#include "kimi/context.h"
#include "kimi/ops/linear.h"
#include "kimi/tensor.h"

namespace kimi::cuda {

// y = x W^T (+ y when beta = 1). M <= 16: a streaming GEMV kernel (gemv_mma.cuh for bf16 x and W, else gemv.cuh);
// larger M: cuBLAS.
void linear(TensorView x, const Weight& w, TensorView y, float beta, const Context& ctx);
// The jobs that take the GEMV (as linear decides) grouped by M, weight format and x dtype, one launch per group of
// up to kGemvMaxJobs (gemv.cuh GemvBatch); the others through linear, one by one.
void linear_many(std::span<const LinearJob> jobs, const Context& ctx);
void mxfp4_dequant(TensorView packed, TensorView scale, TensorView w, const Context& ctx);
void mxfp4_quant(TensorView w, TensorView packed, TensorView scale, const Context& ctx);

// dst (r, c) = round_td(src (r, c) + (beta = 1 ? dst (r, c) : 0)) for r < rows, c < cols, the sum in f32; element
// (r, c) at r * ld + c (float dtypes; a dtype change, a repacking into scratch, or a residual add with beta 1).
// Stream-ordered on ctx's stream.
void convert_rows(const void* src, DType ts, int64_t lds, void* dst, DType td, int64_t ldd, int64_t rows, int64_t cols,
                  const Context& ctx, float beta = 0.f);

// Rows of M at or below which linear uses a GEMV kernel (linear.cu has the exceptions).
inline constexpr int64_t kGemvMaxM = 16;

}  // namespace kimi::cuda
