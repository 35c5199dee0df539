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
#include <span>

#include "kimi/dtype.h"

namespace kimi::cuda::blas {

void gemm_xwt(cudaStream_t s, int64_t m, int64_t n, int64_t k, const void* x, DType xt, int64_t ldx, const void* w,
              DType wt, int64_t ldw, void* y, DType yt, int64_t ldy, float beta);

// One problem of gemm_xwt_grouped: y [m, n] = x [m, k] W [n, k]^T, rows ldx / ldw / ldy apart (device pointers).
struct XwtProblem {
  const void* x;
  const void* w;
  void* y;
  int64_t m, ldx, ldw, ldy;
};

// Every problem (one n and k, one dtype combination, beta 0) in ONE cuBLAS call (cublasGemmGroupedBatchedEx, one
// group per problem: the MoE experts' GEMMs of a layer). Uploads the device pointer arrays with a pageable copy
// (not capturable). Returns false, having launched nothing, when this cuBLAS lacks the call or does not
// support the dtype combination (the caller then loops over gemm_xwt).
bool gemm_xwt_grouped(cudaStream_t s, std::span<const XwtProblem> problems, int64_t n, int64_t k, DType xt, DType wt,
                      DType yt);

}  // namespace kimi::cuda::blas
