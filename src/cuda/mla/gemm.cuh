// src/cuda/mla/gemm.cuh: a plain fp32 tiled GEMM for mla_prefill's latent projection (FFMA, no tensor cores):
//   C[M, N] = A[M, K] W[N, K]^T          fp32 accumulate, fp32 out (C row-major, leading dimension ldc)
// A: rows of a [B, Tr, K] view (row m = (m / Tr, m % Tr), strides a_s0, a_s1; K contiguous), any float dtype;
// W: [N, K] rows of stride ldw, any float dtype. 64 x 64 tiles, 256 threads of 4 x 4 outputs, BK = 16.
// NOTE: kept local to the MLA family on purpose (another change brings a cuBLAS-backed linear); this one is
//   exact in fp32 (the f32 bar is 1e-5 relative), not fast: ~15-20 TFLOP/s at best.
#pragma once

#include "cuda/elementwise.cuh"

namespace kimi::cuda::mla {

inline constexpr int kGemmBM = 64, kGemmBN = 64, kGemmBK = 16, kGemmThreads = 256;

__global__ void __launch_bounds__(kGemmThreads) gemm_awt_kernel(const void* a, int ta, int64_t a_s0, int64_t a_s1,
                                                                int64_t Tr, const void* w, int tw, int64_t ldw,
                                                                float* c, int64_t ldc, int64_t M, int64_t N, int K) {
  __shared__ __align__(16) float As[kGemmBK][kGemmBM + 4];  // k-major: As[k][m]
  __shared__ __align__(16) float Ws[kGemmBK][kGemmBN + 4];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int64_t m0 = int64_t(blockIdx.y) * kGemmBM, n0 = int64_t(blockIdx.x) * kGemmBN;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < K; k0 += kGemmBK) {
#pragma unroll
    for (int e = 0; e < (kGemmBM * kGemmBK) / kGemmThreads; ++e) {
      const int idx = tid + e * kGemmThreads, r = idx / kGemmBK, k = idx % kGemmBK;
      const int64_t m = m0 + r, n = n0 + r;
      const int kk = k0 + k;
      As[k][r] = (m < M && kk < K) ? load_f32(a, (m / Tr) * a_s0 + (m % Tr) * a_s1 + kk, ta) : 0.f;
      Ws[k][r] = (n < N && kk < K) ? load_f32(w, n * ldw + kk, tw) : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kGemmBK; ++k) {
      const float4 av = *reinterpret_cast<const float4*>(&As[k][ty * 4]);
      const float4 wv = *reinterpret_cast<const float4*>(&Ws[k][tx * 4]);
      const float ar[4] = {av.x, av.y, av.z, av.w}, wr[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(ar[i], wr[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t m = m0 + ty * 4 + i;
    if (m >= M) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t n = n0 + tx * 4 + j;
      if (n < N) c[m * ldc + n] = acc[i][j];
    }
  }
}

}  // namespace kimi::cuda::mla
