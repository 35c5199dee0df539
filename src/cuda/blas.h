// src/cuda/blas.h: the CUDA backend's only door to cuBLAS (used by src/cuda/*.cu launchers).
//
// One cuBLAS handle per (device, stream), created on first use (or by prepare) and kept until release or the end
// of the process (bound to that stream, default math mode: CUBLAS_COMPUTE_32F never uses TF32), with a workspace
// of our own (cublasSetWorkspace): cuBLAS then allocates nothing per call, as CUDA graph capture requires. A stream
// that will be captured is prepared first (the handle is never created inside a capture). Every cuBLAS status is
// checked; a failure throws kimi::Error naming the call and the GEMM shape.
//
// gemm_xwt is the projection y = x W^T in row-major terms:
//   x [m, k] rows ldx apart, W [n, k] rows ldw apart, y [m, n] rows ldy apart (all last dims contiguous)
//   y = x W^T + beta * y                                   (beta 0: y is not read)
// Operand dtypes: x and W both f32, both bf16 or both f16; y f32 or the operands' dtype. Products and
// the accumulation are fp32 (bf16/f16 products are exact in fp32). ld* >= k (x, W) and >= n (y) as
// cuBLAS requires (pass k / n when there is one row). Sizes must fit in int32 (cuBLAS's API).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kimi/dtype.h"

namespace kimi::cuda::blas {

// Creates the current device's handle for stream s (and its workspace) now, when it does not exist yet.
void prepare(cudaStream_t s);
// Destroys the current device's handle for s and frees its workspace (before s is destroyed); never throws.
void release(cudaStream_t s);

void gemm_xwt(cudaStream_t s, int64_t m, int64_t n, int64_t k, const void* x, DType xt, int64_t ldx, const void* w,
              DType wt, int64_t ldw, void* y, DType yt, int64_t ldy, float beta);

// gemm_batched: `batch` independent products, problem b at x + b sx, W + b sw, y + b sy (element offsets; sw = 0
// shares one W), each
//   w_t: y = x W^T (W [n, k], rows ldw apart)    !w_t: y = x W (W [k, n], rows ldw apart, ldw >= n)
// with the dtype and leading-dimension rules of gemm_xwt (x and W bf16 or f16 here: the attention products).
void gemm_batched(cudaStream_t s, int64_t batch, int64_t m, int64_t n, int64_t k, const void* x, DType xt, int64_t ldx,
                  int64_t sx, const void* w, DType wt, int64_t ldw, int64_t sw, bool w_t, void* y, DType yt, int64_t ldy,
                  int64_t sy, float beta);

}  // namespace kimi::cuda::blas
