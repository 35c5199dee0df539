// src/cuda/mla/decode.cuh: the fp32 FFMA attend of mla_decode (absorbed form, SPEC 6, kimi/ops/mla.h). The absorb
// before it and the merge / project after it are decode_proj.cuh's kernels; the attend's other family, on bf16 tensor
// cores, is decode_tc.cuh (same inputs, same partials).
//
//  attend (flash-decoding): CTA (head group g of kDecHG heads, split s, token n) streams the cache rows
//     [s * rows_per_split, ...) of its sequence (rows < lens[n]) in tiles of kDecTJ rows converted to fp32 in
//     shared memory, with the kDecHG absorbed queries QL (decode_proj.cuh) resident in shared memory:
//       score_hj = (QL_h . [c_j | k_pe_j]) * scale;  online softmax per head (m_h, l_h)
//       Opart[n, s, h] = sum_j exp(score_hj - m_h) c_j   [R] (unnormalised), ML[n, s, h] = (m_h, l_h)
//     Every row of a tile is read once for all kDecHG heads: at H <= kDecHG the cache streams once per token;
//     at H = 64 the two head groups of a tile run as neighbouring CTAs (blockIdx.x), the second read hits L2.
//
// Thread layout (256 threads = 8 warps): scores: lane = row j of the tile, warp w = heads w + 8i (i < 4);
// the weighted sum: thread t owns latent columns r = t + 256 ri (ri < RI, R <= 256 RI) for all kDecHG heads
// (kDecHG * RI fp32 accumulators in registers).
// NOTE: fp32 FFMA throughout (the f32 bar is 1e-5). At H = 64 this is compute-bound (~2 H flops per cache byte
//   of bf16), far from the cache-bandwidth roofline that bf16 tensor cores would reach; see docs/ops/mla.md.
#pragma once

#include <cstdint>

#include "cuda/elementwise.cuh"

namespace kimi::cuda::mla {

inline constexpr int kDecHG = 32, kDecTJ = 32, kDecThreads = 256;

// ---- attend
struct AttendParams {
  const float* QL;  // [N, H, R+P]
  const void* cache;
  int tc;
  int64_t c_s0, c_s1;
  const int64_t* lens;   // [N]
  const int64_t* slots;  // [N]
  float* Opart;  // [N, S, H, R]
  float* ML;     // [N, S, H, 2]
  int H, R, P, S;
  int64_t rows_per_split;  // a multiple of kDecTJ
  float scale;
};

// Row stride (floats) of the shared QL and cache tiles: R+P rounded up to 4 (float4 loads), plus 4 (banks).
__host__ __device__ inline int dec_kp(int rp) { return (rp + 3) / 4 * 4; }
__host__ __device__ inline int dec_ld(int rp) { return dec_kp(rp) + 4; }
inline size_t attend_smem_bytes(int rp) {
  return sizeof(float) * (size_t(kDecHG) * dec_ld(rp) + size_t(kDecTJ) * dec_ld(rp) + size_t(kDecTJ) * kDecHG + kDecHG);
}

template <int RI>
__global__ void __launch_bounds__(kDecThreads, 1) mla_attend_kernel(const AttendParams p) {
  extern __shared__ __align__(16) float sm[];
  const int rp = p.R + p.P, kp = dec_kp(rp), ld = dec_ld(rp);
  float* QLs = sm;                     // [HG][ld]
  float* Cs = QLs + kDecHG * ld;       // [TJ][ld]
  float* Ps = Cs + kDecTJ * ld;        // [TJ][HG]: p of row j, head h
  float* alpha_s = Ps + kDecTJ * kDecHG;  // [HG]
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = blockIdx.x, s = blockIdx.y;
  const int64_t n = blockIdx.z;
  const int h0 = g * kDecHG;
  const int64_t len = p.lens[n];
  const int64_t row0 = int64_t(s) * p.rows_per_split;
  const int64_t row1 = row0 + p.rows_per_split < len ? row0 + p.rows_per_split : len;  // may be <= row0
  const int64_t cslot = p.slots[n] * p.c_s0;

  for (int idx = tid; idx < kDecHG * kp; idx += kDecThreads) {
    const int hh = idx / kp, k = idx % kp;
    QLs[hh * ld + k] = (h0 + hh < p.H && k < rp) ? p.QL[(n * p.H + h0 + hh) * int64_t(rp) + k] : 0.f;
  }
  float acc[kDecHG][RI];
#pragma unroll
  for (int h = 0; h < kDecHG; ++h)
#pragma unroll
    for (int ri = 0; ri < RI; ++ri) acc[h][ri] = 0.f;
  float mh[4], lh[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) mh[i] = -INFINITY, lh[i] = 0.f;

  for (int64_t j0 = row0; j0 < row1; j0 += kDecTJ) {
    __syncthreads();  // the previous tile's Cs, Ps, alpha_s are no longer read (and QLs is written)
    for (int idx = tid; idx < kDecTJ * kp; idx += kDecThreads) {
      const int j = idx / kp, k = idx % kp;
      const int64_t row = j0 + j;
      Cs[j * ld + k] = (row < row1 && k < rp) ? load_f32(p.cache, cslot + row * p.c_s1 + k, p.tc) : 0.f;
    }
    __syncthreads();
    // Scores: lane = row j, heads warp + 8i.
    float sc[4] = {0.f, 0.f, 0.f, 0.f};
    const float* crow = Cs + lane * ld;
    for (int k = 0; k < kp; k += 4) {
      const float4 c = *reinterpret_cast<const float4*>(crow + k);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float4 qv = *reinterpret_cast<const float4*>(QLs + (warp + 8 * i) * ld + k);
        sc[i] = fmaf(qv.x, c.x, sc[i]);
        sc[i] = fmaf(qv.y, c.y, sc[i]);
        sc[i] = fmaf(qv.z, c.z, sc[i]);
        sc[i] = fmaf(qv.w, c.w, sc[i]);
      }
    }
    const bool valid = j0 + lane < row1;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float si = valid ? sc[i] * p.scale : -INFINITY;
      float mx = si;
#pragma unroll
      for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
      const float mnew = fmaxf(mh[i], mx);
      const float mref = mnew == -INFINITY ? 0.f : mnew;  // no valid row yet: p = 0, no NaN
      const float e = expf(si - mref);
      float sum = e;
#pragma unroll
      for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
      const float alpha = expf(mh[i] - mref);
      lh[i] = lh[i] * alpha + sum;
      mh[i] = mnew;
      Ps[lane * kDecHG + warp + 8 * i] = e;
      if (lane == 0) alpha_s[warp + 8 * i] = alpha;
    }
    __syncthreads();
    // Weighted sum of the latent rows: thread owns columns r = tid + 256 ri, all kDecHG heads.
#pragma unroll
    for (int h = 0; h < kDecHG; ++h) {
      const float a = alpha_s[h];
#pragma unroll
      for (int ri = 0; ri < RI; ++ri) acc[h][ri] *= a;
    }
    const int jn = int(row1 - j0 < kDecTJ ? row1 - j0 : kDecTJ);
    for (int j = 0; j < jn; ++j) {
      float c[RI];
#pragma unroll
      for (int ri = 0; ri < RI; ++ri) {
        const int r = tid + kDecThreads * ri;
        c[ri] = r < kp ? Cs[j * ld + r] : 0.f;
      }
      const float* pj = Ps + j * kDecHG;
#pragma unroll
      for (int h4 = 0; h4 < kDecHG; h4 += 4) {
        const float4 pv = *reinterpret_cast<const float4*>(pj + h4);
#pragma unroll
        for (int ri = 0; ri < RI; ++ri) {
          acc[h4][ri] = fmaf(pv.x, c[ri], acc[h4][ri]);
          acc[h4 + 1][ri] = fmaf(pv.y, c[ri], acc[h4 + 1][ri]);
          acc[h4 + 2][ri] = fmaf(pv.z, c[ri], acc[h4 + 2][ri]);
          acc[h4 + 3][ri] = fmaf(pv.w, c[ri], acc[h4 + 3][ri]);
        }
      }
    }
  }

  // Partials (also for an empty split: m = -inf, l = 0, O = 0).
  const int64_t base = (n * p.S + s) * int64_t(p.H);
#pragma unroll
  for (int h = 0; h < kDecHG; ++h) {
    if (h0 + h >= p.H) break;
#pragma unroll
    for (int ri = 0; ri < RI; ++ri) {
      const int r = tid + kDecThreads * ri;
      if (r < p.R) p.Opart[(base + h0 + h) * p.R + r] = acc[h][ri];
    }
  }
  if (lane == 0) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int h = h0 + warp + 8 * i;
      if (h < p.H) {
        p.ML[(base + h) * 2] = mh[i];
        p.ML[(base + h) * 2 + 1] = lh[i];
      }
    }
  }
}

}  // namespace kimi::cuda::mla
