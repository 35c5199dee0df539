// src/cuda/kda/seqpar.cuh: phase 2 of the sequence-parallel chunkwise KDA walk (chunk.cuh's "Segments"
// paragraph): the scan of the segment maps.
//
// Phase 2, kda_seg_scan<D> (grid N x H x D / 32, 256 threads; one CTA per (sequence, head, 32 state rows v)):
// with X_g = S^T at the start of segment g ([D][D] fp32, rows v, columns k; phase 1 left the true start of
// segment 1 in X_{g0 + 1} and C_j^T in X_{g0 + j + 1} for the middle segments j = 1 .. P - 2) and R_j = the
// identity-column walk of segment j (row i = M_j e_i, so R_j[i][k] = M_j[k][i]):
//     X_{j+1}[v][k] = sum_i X_j[v][i] R_j[i][k] + C_j^T[v][k]     (S_{j+1} = M_j S_j + C_j, transposed)
// sequentially over j, in fp32 (K = 128: 128-term fp32 sums, ~1e-7 relative each; the maps came from the walk
// with its hi + lo split products). R_j is staged in shared memory (64 KB at D = 128), the 32 rows of X_j too.
#pragma once

#include <cstdint>

#include "cuda/kda/chunk.cuh"

namespace kimi::cuda::kda_chunk {

constexpr int kScanRows = 32, kScanThreads = 256;

template <int D>
struct ScanSmem {
  static constexpr size_t R = 0, X = R + size_t(D) * D * 4, TOTAL = X + size_t(kScanRows) * D * 4;
};

template <int D>
__global__ void __launch_bounds__(kScanThreads) kda_seg_scan(const Params p) {
  using L = ScanSmem<D>;
  constexpr int NT = D / kScanRows, NG = kScanThreads / D, RV = kScanRows / NG;
  static_assert(kScanThreads % D == 0 && kScanRows % NG == 0, "scan tiles");
  extern __shared__ __align__(128) unsigned char smem[];  // one declaration for the TU: the walk needs 128
  float* const sR = reinterpret_cast<float*>(smem + L::R);  // R_j [D][D]
  float* const sX = reinterpret_cast<float*>(smem + L::X);  // X_j rows r0 .. r0 + 32 [32][D]
  const int tid = threadIdx.x, bid = int(blockIdx.x);
  const int r0 = (bid % NT) * kScanRows, h = (bid / NT) % p.H, n = bid / (NT * p.H);
  const int64_t g0 = p.segbase[n], P = p.segbase[n + 1] - g0;
  if (P < 3) return;  // no middle segment: segment 1 starts where phase 1 left it
  const size_t blk = size_t(D) * D;
  const int k = tid % D, vg = tid / D;  // a warp shares vg: the sX reads below are broadcasts
  {
    const float* x = p.seg_start + (size_t(g0 + 1) * p.H + h) * blk + size_t(r0) * D;
    for (int e = tid; e < kScanRows * D / 4; e += kScanThreads)
      reinterpret_cast<float4*>(sX)[e] = reinterpret_cast<const float4*>(x)[e];
  }
  for (int64_t j = 1; j + 1 < P; ++j) {
    const float* r = p.seg_map + (size_t(g0 + j) * p.H + h) * blk;
    float* x1 = p.seg_start + (size_t(g0 + j + 1) * p.H + h) * blk + size_t(r0) * D;
    for (int e = tid; e < D * D / 4; e += kScanThreads)
      reinterpret_cast<float4*>(sR)[e] = reinterpret_cast<const float4*>(r)[e];
    float acc[RV];
#pragma unroll
    for (int q = 0; q < RV; ++q) acc[q] = x1[size_t(vg + NG * q) * D + k];  // C_j^T
    __syncthreads();  // R_j (and, first time, X_1) in shared memory
#pragma unroll 4
    for (int i = 0; i < D; ++i) {
      const float rik = sR[i * D + k];
#pragma unroll
      for (int q = 0; q < RV; ++q) acc[q] = fmaf(sX[(vg + NG * q) * D + i], rik, acc[q]);
    }
    __syncthreads();  // every read of sX and sR done
#pragma unroll
    for (int q = 0; q < RV; ++q) {
      sX[(vg + NG * q) * D + k] = acc[q];
      x1[size_t(vg + NG * q) * D + k] = acc[q];
    }
  }
}

}  // namespace kimi::cuda::kda_chunk
