// src/cuda/mla/flash_wgmma.cuh: the fused causal attention of mla_prefill (flash.cuh's math, parameters and global
// layouts) with Hopper warpgroup MMA (wgmma.mma_async, sm_90a; cuda/wgmma.cuh) in place of mma.sync: the second
// form of the fused kernel, chosen through options.h (MlaPrefillPath::fused_wgmma) until the H200 says which is the
// default.
//
// Tiling: one CTA of 2 warpgroups per (tile of kFwBQ = 128 queries of one sequence, head); warpgroup w owns query
// rows 64w .. 64w + 63 (warp w' = warp % 4 of it rows 16w' .. 16w' + 15 of those, as in flash.cuh). Key tiles of
// kFwBK = 64 stream from key 0 up to the tile's last query, K and V double buffered with cp.async by all threads
// (no producer warps). Per key tile and warpgroup:
//   S [64][64] = Q_w K^T            DK / 16 SS wgmmas m64n64k16 (Q and K both K-major in shared memory)
//   mask, online softmax in fp32 registers exactly as flash.cuh (the accumulator fragment of warp w' is the
//     mma.sync m16n8 fragment of its 16 rows)
//   O [64][DV] += P V               per 16-key step, DV / 64 RS wgmmas m64n64k16: P from the S registers packed to
//                                   bf16 (wgmma.cuh a_frag layout), V MN-major (dv contiguous) in shared memory
// A warpgroup whose rows all precede a key tile skips it; the branch is on a warp-uniform broadcast of the warpgroup
// index (wgmma.cuh: otherwise ptxas serializes the wgmmas).
//
// Shared memory: bf16 tiles in wgmma.cuh's 128-byte swizzle, atom-major [C / 64][R][64] (sw128_off<R>), every tile
// 1024-byte aligned: Q [kFwBQ][DK], K [2][kFwBK][DK], V [2][kFwBK][DV]; the sizes of flash.cuh plus 1 KB of
// alignment slack. cp.async writes reach the async proxy by fence_proxy_async before the barrier that precedes the
// wgmmas. Zero fill, conditions and the epilogue as in flash.cuh.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "cuda/bulk_copy.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/mla/flash.cuh"
#include "cuda/wgmma.cuh"

namespace kimi::cuda::mla {

inline constexpr int kFwBQ = 128, kFwBK = 64, kFwThreads = 256;

template <int DK, int DV>
constexpr size_t flash_wgmma_smem_bytes() {
  return sizeof(__nv_bfloat16) * (size_t(kFwBQ) * DK + 2 * size_t(kFwBK) * DK + 2 * size_t(kFwBK) * DV) + 1024;
}

template <int DK, int DV>
__global__ void __launch_bounds__(kFwThreads, 1) mla_flash_wgmma_kernel(const FlashParams p) {
  static_assert(DK % 64 == 0 && DV % 64 == 0, "whole 64-column swizzle atoms");
  using bf16 = __nv_bfloat16;
  using wgmma::sw128_off;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char* const smem = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  bf16* Qs = reinterpret_cast<bf16*>(smem);
  bf16* Ks = Qs + kFwBQ * DK;      // [2][kFwBK * DK]
  bf16* Vs = Ks + 2 * kFwBK * DK;  // [2][kFwBK * DV]

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wg = __shfl_sync(0xffffffffu, tid / 128, 0);  // warp-uniform as ptxas sees it
  const int h = blockIdx.y;
  const int64_t m0 = p.tiles[3 * blockIdx.x], i0 = p.tiles[3 * blockIdx.x + 1];
  const int nq = int(p.tiles[3 * blockIdx.x + 2]);
  const int Dn = p.Dn, Dk = p.Dn + p.P, Dv = p.Dv;
  const int64_t kvh = int64_t(h) * (Dn + Dv);
  const int64_t nkeys = i0 + nq;
  const int ntiles = int((nkeys + kFwBK - 1) / kFwBK);

  for (int idx = tid; idx < kFwBQ * (DK / 8); idx += kFwThreads) {
    const int r = idx / (DK / 8), c = (idx % (DK / 8)) * 8;
    const bool valid = r < nq && c < Dk;
    const bf16* src = valid ? p.q + (m0 + i0 + r) * p.q_tok + h * p.q_head + c : p.q;
    flash::cp16(Qs + sw128_off<kFwBQ>(r, c), src, valid);
  }
  const auto load_kv = [&](int t, int buf) {
    const int64_t k0 = int64_t(t) * kFwBK;
    bf16* ks = Ks + buf * kFwBK * DK;
    bf16* vs = Vs + buf * kFwBK * DV;
    for (int idx = tid; idx < kFwBK * (DK / 8); idx += kFwThreads) {
      const int j = idx / (DK / 8), c = (idx % (DK / 8)) * 8;
      const int64_t m = m0 + k0 + j;
      const bool key = k0 + j < nkeys;
      const bf16* src = p.kv;
      bool valid = false;
      if (key && c < Dn) src = p.kv + m * p.ldkv + kvh + c, valid = true;
      else if (key && c < Dk) src = p.pe + m * p.pe_tok + (c - Dn), valid = true;
      flash::cp16(ks + sw128_off<kFwBK>(j, c), src, valid);
    }
    for (int idx = tid; idx < kFwBK * (DV / 8); idx += kFwThreads) {
      const int j = idx / (DV / 8), c = (idx % (DV / 8)) * 8;
      const bool valid = k0 + j < nkeys && c < Dv;
      const bf16* src = valid ? p.kv + (m0 + k0 + j) * p.ldkv + kvh + Dn + c : p.kv;
      flash::cp16(vs + sw128_off<kFwBK>(j, c), src, valid);
    }
  };
  load_kv(0, 0);
  flash::cp_commit();

  const int g = lane / 4, t4 = lane % 4;
  const int wrow0 = wg * 64;                 // the warpgroup's first row in the tile
  const int row0 = wrow0 + (warp % 4) * 16;  // the warp's first row
  const int64_t qi0 = i0 + row0 + g, qi1 = qi0 + 8;
  const bool wg_active = wrow0 < nq;
  float acc[DV / 64][8][4];
#pragma unroll
  for (int hh = 0; hh < DV / 64; ++hh)
#pragma unroll
    for (int n = 0; n < 8; ++n) acc[hh][n][0] = acc[hh][n][1] = acc[hh][n][2] = acc[hh][n][3] = 0.f;
  float mx0 = -INFINITY, mx1 = -INFINITY, l0 = 0.f, l1 = 0.f;
  // Q rows of this warpgroup: 64-row slab of every column atom (atoms kFwBQ rows apart)
  const uint64_t dQ = wgmma::desc_sw128(Qs + sw128_off<kFwBQ>(wrow0, 0));

  for (int t = 0; t < ntiles; ++t) {
    if (t + 1 < ntiles) {
      load_kv(t + 1, (t + 1) & 1);
      flash::cp_commit();
      flash::cp_wait<1>();
    } else {
      flash::cp_wait<0>();
    }
    fence_proxy_async();  // this thread's cp.async writes, visible to the wgmmas after the barrier
    __syncthreads();
    const int64_t k0 = int64_t(t) * kFwBK;
    if (wg_active && k0 <= i0 + wrow0 + 63) {
      const uint64_t dK = wgmma::desc_sw128(Ks + (t & 1) * kFwBK * DK);
      const uint64_t dV = wgmma::desc_sw128(Vs + (t & 1) * kFwBK * DV);
      float s[8][4];
#pragma unroll
      for (int n = 0; n < 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
      wgmma::fence();
#pragma unroll
      for (int ks = 0; ks < DK / 16; ++ks) {
        const uint32_t off_q = uint32_t((ks / 4) * kFwBQ * 128 + (ks % 4) * 32);
        const uint32_t off_k = uint32_t((ks / 4) * kFwBK * 128 + (ks % 4) * 32);
        wgmma::mma<64, 0, 0>(s, wgmma::desc_add(dQ, off_q), wgmma::desc_add(dK, off_k));
      }
      wgmma::commit();
      wgmma::wait<0>();
      wgmma::fence_operands(s);

      const bool diag = k0 + kFwBK - 1 > i0 + row0;
      float tm0 = -INFINITY, tm1 = -INFINITY;
#pragma unroll
      for (int n = 0; n < 8; ++n) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int64_t kj = k0 + n * 8 + 2 * t4 + e;
          float x0 = s[n][e] * p.scale_log2, x1 = s[n][2 + e] * p.scale_log2;
          if (diag && kj > qi0) x0 = -INFINITY;
          if (diag && kj > qi1) x1 = -INFINITY;
          s[n][e] = x0, s[n][2 + e] = x1;
          tm0 = fmaxf(tm0, x0), tm1 = fmaxf(tm1, x1);
        }
      }
#pragma unroll
      for (int o = 1; o <= 2; o *= 2) {
        tm0 = fmaxf(tm0, __shfl_xor_sync(0xffffffffu, tm0, o));
        tm1 = fmaxf(tm1, __shfl_xor_sync(0xffffffffu, tm1, o));
      }
      const float mn0 = fmaxf(mx0, tm0), mn1 = fmaxf(mx1, tm1);
      // rows of a warp entirely before the tile (the warpgroup still runs it): all -inf, p = 0, alpha = 1
      const float r0 = mn0 == -INFINITY ? 0.f : mn0, r1 = mn1 == -INFINITY ? 0.f : mn1;
      const float al0 = exp2f(mx0 - r0), al1 = exp2f(mx1 - r1);
      mx0 = mn0, mx1 = mn1;
      float sum0 = 0.f, sum1 = 0.f;
#pragma unroll
      for (int n = 0; n < 8; ++n) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          s[n][e] = exp2f(s[n][e] - r0);
          s[n][2 + e] = exp2f(s[n][2 + e] - r1);
          sum0 += s[n][e], sum1 += s[n][2 + e];
        }
      }
      l0 = l0 * al0 + sum0, l1 = l1 * al1 + sum1;
#pragma unroll
      for (int hh = 0; hh < DV / 64; ++hh)
#pragma unroll
        for (int n = 0; n < 8; ++n)
          acc[hh][n][0] *= al0, acc[hh][n][1] *= al0, acc[hh][n][2] *= al1, acc[hh][n][3] *= al1;
      uint32_t pf[kFwBK / 16][4];
#pragma unroll
      for (int kk = 0; kk < kFwBK / 16; ++kk) {
        pf[kk][0] = flash::pack_bf16(s[2 * kk][0], s[2 * kk][1]);
        pf[kk][1] = flash::pack_bf16(s[2 * kk][2], s[2 * kk][3]);
        pf[kk][2] = flash::pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
        pf[kk][3] = flash::pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
      }
      wgmma::fence();
#pragma unroll
      for (int kk = 0; kk < kFwBK / 16; ++kk)
#pragma unroll
        for (int hh = 0; hh < DV / 64; ++hh)
          wgmma::mma_rs<64, 1>(acc[hh], pf[kk], wgmma::desc_add(dV, uint32_t(hh * kFwBK * 128 + kk * 2048)));
      wgmma::commit();
      wgmma::wait<0>();
#pragma unroll
      for (int hh = 0; hh < DV / 64; ++hh) wgmma::fence_operands(acc[hh]);
      wgmma::fence_operands(pf);
    }
    __syncthreads();  // buffer t & 1 is refilled by the next iteration's load
  }

  if (!wg_active) return;
#pragma unroll
  for (int o = 1; o <= 2; o *= 2) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, o);
    l1 += __shfl_xor_sync(0xffffffffu, l1, o);
  }
  const float inv0 = 1.f / l0, inv1 = 1.f / l1;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = row0 + g + 8 * half;
    if (r >= nq) continue;
    const int64_t m = m0 + i0 + r;
    const float inv = half ? inv1 : inv0;
#pragma unroll
    for (int hh = 0; hh < DV / 64; ++hh)
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int c = hh * 64 + n * 8 + 2 * t4 + e;
          if (c >= Dv) continue;
          float v = acc[hh][n][2 * half + e] * inv;
          if (p.gate) v *= sigmoid_f32(load_f32(p.gate, m * p.g_tok + int64_t(h) * Dv + c, p.tg));
          store_f32(p.o, m * p.o_tok + int64_t(h) * p.o_head + c, p.to, v);
        }
  }
}

}  // namespace kimi::cuda::mla
