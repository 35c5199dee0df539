// src/cuda/blas.h: the CUDA backend's only door to cuBLAS (used by src/cuda/*.cu launchers).
//
// One cuBLAS handle per (device, stream), created on first use and kept for the life of the process
// (bound to that stream, default math mode: CUBLAS_COMPUTE_32F never uses TF32). Every cuBLAS status is
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

void gemm_xwt(cudaStream_t s, int64_t m, int64_t n, int64_t k, const void* x, DType xt, int64_t ldx, const void* w,
              DType wt, int64_t ldw, void* y, DType yt, int64_t ldy, float beta);

}  // namespace kimi::cuda::blas
