// src/cuda/linear/gemv_mma.cuh: the small-M projection y[m, n] (=|+=) sum_k x[m, k] W[n, k] for bf16 x and dense
// bf16 W, M <= 16 (decode), on tensor cores: y^T [n, m] = W [n, k] x^T [k, m] with the weights as the MMA's A
// operand (16 rows) and up to 8 tokens of x per B operand (mma.sync m16n8k16, bf16 x bf16 products exact in f32,
// f32 accumulation), so every weight byte streams from HBM once for all M rows and the multiply costs two MMA
// instructions per 1 KB of weights instead of M FFMA per weight (gemv.cuh, which stays for f32 x, f16 and MXFP4).
//
// Layout. A warp owns 16 weight rows r0 + [0, 16) (rows past n are clamped for loads and never written) and walks
// K in steps of 32 columns: lane l = 4 g + q loads 16 bytes (8 columns 32 s + 8 q + [0, 8)) of rows r0 + g and
// r0 + g + 8 and of x rows g (and g + 8 when MB = 2). The sum over k does not care which MMA k-slot a column feeds as
// long as A and B agree, so each lane's 8 columns feed two MMAs: columns [0, 4) MMA 0, [4, 8) MMA 1, as the A
// fragment pairs (a0 a1 | a4 a5) of rows g / g + 8 and the B fragment pair (b0 b1 | b2 b3) of token g: logical k
// 2 q + e -> column 8 q + 4 h + e, 2 q + 8 + e -> 8 q + 4 h + 2 + e (MMA h, e in {0, 1}). Columns past k are zero in
// both operands (k % 8 == 0, so a lane's 8 columns are all in or all out); tokens past m are zero in B.
// Split K: ks warps of a CTA (ks in {1, 2, 4, 8}: GemvArgs::ks) share a row tile, warp p taking steps
// [p per, (p + 1) per), per = ceil(steps / ks); their f32 fragments are summed through shared memory in warp order
// (fixed: the result does not depend on timing). A CTA holds 8 / ks row tiles.
// Pipeline: a ring of U steps per lane (W and x registers); consuming step s refills its slot with step s + U, so
// U - 1 to U steps (U KB of weights per warp) stay in flight without a gap between rounds. Weights are read with
// ld.global.nc.L1::no_allocate.L2::256B (streamed past L1; the L2 fetches the whole 256-byte block, which the
// warp's next steps read). Launched with programmatic_launch (pdl.cuh): the ring's first weight loads are issued
// before pdl_wait(), x (written by the kernel before) after it.
// Alignment (the launcher checks it, else gemv.cuh): W and x base 16-byte aligned, rows a multiple of 8 elements
// apart, k % 8 == 0.
// The result is deterministic (fixed MMA order per warp, fixed reduction order) and each job of a GemvBatch is laid
// out exactly as its own launch.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "cuda/elementwise.cuh"
#include "cuda/linear/gemv.cuh"
#include "cuda/pdl.cuh"

namespace kimi::cuda {

constexpr int kGemvMmaWarps = 8;
constexpr int kGemvMmaThreads = 32 * kGemvMmaWarps;
constexpr int kGemvMmaRows = 16;  // weight rows per warp (the MMA's M)
constexpr int kGemvMmaStep = 32;  // columns per step (8 per lane of a quad)

namespace gemv_mma {

__device__ __forceinline__ uint4 ld_weights(const __nv_bfloat16* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// x through the read-only path (every row tile reads it: L2 hits); a compiler-visible load, so it stays after
// pdl_wait().
__device__ __forceinline__ uint4 ld_x(const __nv_bfloat16* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }

// d (16 x 8 f32) += A (16 x 16 bf16: a0 a1 row g, a2 a3 row g + 8, a4 a5 row g, a6 a7 row g + 8) B (16 x 8 bf16:
// b0 b1, b2 b3 of column g), the PTX fragment layout of mma.m16n8k16 (g = lane / 4).
__device__ __forceinline__ void mma(float (&d)[4], uint32_t a01, uint32_t a23, uint32_t a45, uint32_t a67,
                                    uint32_t b01, uint32_t b23) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a01), "r"(a23), "r"(a45), "r"(a67), "r"(b01), "r"(b23));
}

}  // namespace gemv_mma

// MB: token blocks of 8 (M <= 8 * MB); U: steps in flight per lane.
template <int MB, int U>
__global__ void __launch_bounds__(kGemvMmaThreads, 2) gemv_mma_kernel(const __grid_constant__ GemvBatch batch) {
  pdl_launch_dependents();  // the next kernel may start once every CTA of this one is running
  int j = 0;
  while (j + 1 < batch.count && int64_t(blockIdx.x) >= batch.block_end[j]) ++j;  // block-uniform
  const GemvArgs& a = batch.job[j];
  const int64_t block = int64_t(blockIdx.x) - (j ? batch.block_end[j - 1] : 0);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, ks = a.ks, part = warp % ks;
  const int g = lane / 4, q = lane % 4;
  const int64_t r0 = (block * (kGemvMmaWarps / ks) + warp / ks) * kGemvMmaRows;
  const bool live = r0 < a.n;  // a dead warp still reaches the barrier below
  const int64_t steps = (a.k + kGemvMmaStep - 1) / kGemvMmaStep, per = (steps + ks - 1) / ks;
  const int64_t s_begin = live ? min(steps, part * per) : 0, s_end = live ? min(steps, s_begin + per) : 0;

  const auto* w = static_cast<const __nv_bfloat16*>(a.w);
  const auto* x = static_cast<const __nv_bfloat16*>(a.x);
  const __nv_bfloat16* w_lo = w + min(r0 + g, a.n - 1) * a.ldw + 8 * q;      // row r0 + g, this lane's columns
  const __nv_bfloat16* w_hi = w + min(r0 + g + 8, a.n - 1) * a.ldw + 8 * q;  // row r0 + g + 8
  const __nv_bfloat16* x_row[MB];
  bool x_live[MB];
#pragma unroll
  for (int b = 0; b < MB; ++b) {
    x_live[b] = g + 8 * b < a.m;
    x_row[b] = x + (x_live[b] ? g + 8 * b : 0) * a.ldx + 8 * q;
  }
  const int64_t k_lane = a.k - 8 * q;  // step s's chunk of this lane is inside K iff 32 s < k_lane

  uint4 wr[U][2], xr[U][MB];  // the ring: slot u holds step s with s % U == u (relative to s_begin)
  const auto load_w = [&](int u, int64_t s) {
    const int64_t c = s * kGemvMmaStep;
    if (c < k_lane) {
      wr[u][0] = gemv_mma::ld_weights(w_lo + c);
      wr[u][1] = gemv_mma::ld_weights(w_hi + c);
    } else {
      wr[u][0] = wr[u][1] = make_uint4(0, 0, 0, 0);
    }
  };
  const auto load_x = [&](int u, int64_t s) {
    const int64_t c = s * kGemvMmaStep;
#pragma unroll
    for (int b = 0; b < MB; ++b)
      xr[u][b] = x_live[b] && c < k_lane ? gemv_mma::ld_x(x_row[b] + c) : make_uint4(0, 0, 0, 0);
  };

  float acc[MB][4];
#pragma unroll
  for (int b = 0; b < MB; ++b)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[b][e] = 0.f;

#pragma unroll
  for (int u = 0; u < U; ++u)
    if (s_begin + u < s_end) load_w(u, s_begin + u);
  pdl_wait();  // x (and y) come from earlier kernels
#pragma unroll
  for (int u = 0; u < U; ++u)
    if (s_begin + u < s_end) load_x(u, s_begin + u);
  for (int64_t s = s_begin; s < s_end; s += U) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (s + u >= s_end) break;
#pragma unroll
      for (int b = 0; b < MB; ++b) {
        gemv_mma::mma(acc[b], wr[u][0].x, wr[u][1].x, wr[u][0].y, wr[u][1].y, xr[u][b].x, xr[u][b].y);
        gemv_mma::mma(acc[b], wr[u][0].z, wr[u][1].z, wr[u][0].w, wr[u][1].w, xr[u][b].z, xr[u][b].w);
      }
      if (s + u + U < s_end) {
        load_w(u, s + u + U);
        load_x(u, s + u + U);
      }
    }
  }

  // Split-K sum in warp order through shared memory ([warp][value][lane]: conflict-free), then the fragment's
  // outputs: acc[b][2 h + e] is row r0 + g + 8 h, token 8 b + 2 q + e.
  __shared__ float red[kGemvMmaWarps][MB * 4][32];
  if (ks > 1) {
    if (part != 0) {
#pragma unroll
      for (int b = 0; b < MB; ++b)
#pragma unroll
        for (int e = 0; e < 4; ++e) red[warp][4 * b + e][lane] = acc[b][e];
    }
    __syncthreads();
  }
  if (!live || part != 0) return;
#pragma unroll
  for (int b = 0; b < MB; ++b)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float v = acc[b][e];
      for (int p = 1; p < ks; ++p) v += red[warp + p][4 * b + e][lane];
      const int64_t row = r0 + g + 8 * (e / 2);
      const int token = 8 * b + 2 * q + e % 2;
      if (token >= a.m || row >= a.n) continue;
      const int64_t off = int64_t(token) * a.ldy + row;
      store_f32(a.y, off, a.ty, a.beta != 0.f ? load_f32(a.y, off, a.ty) + v : v);
    }
}

}  // namespace kimi::cuda
