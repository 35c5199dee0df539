// src/cuda/mla/flash_fa3.cuh: the fused causal attention of mla_prefill (flash.cuh's math, parameters and global
// layouts) on Hopper warpgroup MMA with the FlashAttention-3 schedule: the third form of the fused kernel, chosen
// through options.h (MlaPrefillPath::fused_fa3); not the default until the H200 has timed it.
//
// Math and rounding: exactly flash.cuh / flash_wgmma.cuh (S in fp32, online softmax in fp32 in base 2, P rounded to
// bf16 once, O accumulated in fp32); only the order in which the wgmma groups are issued and waited changes.
//
// Tiling: one CTA of 2 warpgroups per (tile of kFaBQ = 128 queries of one sequence, head); warpgroup w owns query
// rows 64w .. 64w + 63 and runs key tiles 0 .. last_w (its last row's tile: causal), so warpgroup 0 may stop one
// tile before warpgroup 1. Per warpgroup, intra-warpgroup pipelining: the S of key tile t is issued before the
// P V of tile t - 1, and the softmax of tile t runs while that P V is on the tensor cores:
//   t = 0:      S_0 = Q K_0^T; wait; softmax(S_0) -> P_0 (bf16 registers), alpha_0 (acc is 0)
//   t = 1 ..:   issue S_t = Q K_t^T (group a); issue O += P_{t-1} V_{t-1} (group b);
//               wait<1> (a done); softmax(S_t) -> m, l, alpha_t in registers;
//               wait<0> (b done); O *= alpha_t; P_t = bf16(p_t)
//   last:       issue O += P_last V_last; wait<0>
// S_t and P_{t-1} live in different registers (s, pf); O is rescaled only after the group that writes it has
// completed (fence_operands pins the order).
//
// Loads: cp.async by all threads into a ring of kFaStages = 3 K / V buffers: at iteration t (after the barrier that
// ends every thread's iteration t - 1) tile t + 1 is loaded into buffer (t + 1) % 3, which last held tile t - 2,
// whose P V completed in iteration t - 1 of every warpgroup; tile t's buffer was filled in iteration t - 1 and
// its P V completes in iteration t + 1 (or in iteration t for a warpgroup's last tile). One __syncthreads per tile.
//
// Shared memory: bf16 tiles in wgmma.cuh's 128-byte swizzle, atom-major (sw128_off<R>), 1024-byte aligned:
// Q [kFaBQ][DK], K [3][kFaBK][DK], V [3][kFaBK][DV]: 168 KB + 1 KB slack at DK = 192, DV = 128. Zero fill,
// conditions and the epilogue as in flash.cuh.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "cuda/bulk_copy.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/mla/flash.cuh"
#include "cuda/wgmma.cuh"

namespace kimi::cuda::mla {

inline constexpr int kFaBQ = 128, kFaBK = 64, kFaStages = 3, kFaThreads = 256;

template <int DK, int DV>
constexpr size_t flash_fa3_smem_bytes() {
  return sizeof(__nv_bfloat16) * (size_t(kFaBQ) * DK + kFaStages * size_t(kFaBK) * (DK + DV)) + 1024;
}

namespace fa3 {

// Online softmax of one S tile (the warpgroup accumulator fragment: rows g, g + 8 of the warp's 16, columns
// 8 n + 2 t4 + e), in place: s becomes p = 2^(x - m_new); m, l updated; returns alpha = 2^(m_old - m_new) per row.
// Keys past a row's query (kj > qi) are -inf where the tile reaches past the warp's first row (diag).
__device__ __forceinline__ void softmax_tile(float (&s)[8][4], float& mx0, float& mx1, float& l0, float& l1,
                                             float& al0, float& al1, bool diag, int64_t k0, int t4, int64_t qi0,
                                             int64_t qi1, float scale_log2) {
  float tm0 = -INFINITY, tm1 = -INFINITY;
#pragma unroll
  for (int n = 0; n < 8; ++n) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int64_t kj = k0 + n * 8 + 2 * t4 + e;
      float x0 = s[n][e] * scale_log2, x1 = s[n][2 + e] * scale_log2;
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
  al0 = exp2f(mx0 - r0), al1 = exp2f(mx1 - r1);
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
}

// P (bf16) of key step kk = the S n-tiles 2 kk, 2 kk + 1 (wgmma.cuh a_frag layout).
__device__ __forceinline__ void pack_p(uint32_t (&pf)[kFaBK / 16][4], const float (&s)[8][4]) {
#pragma unroll
  for (int kk = 0; kk < kFaBK / 16; ++kk) {
    pf[kk][0] = flash::pack_bf16(s[2 * kk][0], s[2 * kk][1]);
    pf[kk][1] = flash::pack_bf16(s[2 * kk][2], s[2 * kk][3]);
    pf[kk][2] = flash::pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    pf[kk][3] = flash::pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
  }
}

// S [64][64] = Q_w K^T: DK / 16 SS wgmmas (Q atoms kQRows rows apart, K atoms kFaBK rows apart), one group.
template <int DK, int kQRows>
__device__ __forceinline__ void issue_s(float (&s)[8][4], uint64_t dQ, uint64_t dK) {
#pragma unroll
  for (int n = 0; n < 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
  wgmma::fence();
#pragma unroll
  for (int ks = 0; ks < DK / 16; ++ks) {
    const uint32_t off_q = uint32_t((ks / 4) * kQRows * 128 + (ks % 4) * 32);
    const uint32_t off_k = uint32_t((ks / 4) * kFaBK * 128 + (ks % 4) * 32);
    wgmma::mma<64, 0, 0>(s, wgmma::desc_add(dQ, off_q), wgmma::desc_add(dK, off_k));
  }
  wgmma::commit();
}

// O [64][DV] += P V: per 16-key step, DV / 64 RS wgmmas (V MN-major), one group.
template <int DV>
__device__ __forceinline__ void issue_pv(float (&acc)[DV / 64][8][4], const uint32_t (&pf)[kFaBK / 16][4],
                                         uint64_t dV) {
  wgmma::fence();
#pragma unroll
  for (int kk = 0; kk < kFaBK / 16; ++kk)
#pragma unroll
    for (int hh = 0; hh < DV / 64; ++hh)
      wgmma::mma_rs<64, 1>(acc[hh], pf[kk], wgmma::desc_add(dV, uint32_t(hh * kFaBK * 128 + kk * 2048)));
  wgmma::commit();
}

}  // namespace fa3

template <int DK, int DV>
__global__ void __launch_bounds__(kFaThreads, 1) mla_flash_fa3_kernel(const FlashParams p) {
  static_assert(DK % 64 == 0 && DV % 64 == 0, "whole 64-column swizzle atoms");
  using bf16 = __nv_bfloat16;
  using wgmma::sw128_off;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char* const smem = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  bf16* Qs = reinterpret_cast<bf16*>(smem);
  bf16* Ks = Qs + kFaBQ * DK;              // [kFaStages][kFaBK * DK]
  bf16* Vs = Ks + kFaStages * kFaBK * DK;  // [kFaStages][kFaBK * DV]

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wg = __shfl_sync(0xffffffffu, tid / 128, 0);  // warp-uniform as ptxas sees it
  const int h = blockIdx.y;
  const int64_t m0 = p.tiles[3 * blockIdx.x], i0 = p.tiles[3 * blockIdx.x + 1];
  const int nq = int(p.tiles[3 * blockIdx.x + 2]);
  const int Dn = p.Dn, Dk = p.Dn + p.P, Dv = p.Dv;
  const int64_t kvh = int64_t(h) * (Dn + Dv);
  const int64_t nkeys = i0 + nq;
  const int ntiles = int((nkeys + kFaBK - 1) / kFaBK);

  for (int idx = tid; idx < kFaBQ * (DK / 8); idx += kFaThreads) {
    const int r = idx / (DK / 8), c = (idx % (DK / 8)) * 8;
    const bool valid = r < nq && c < Dk;
    const bf16* src = valid ? p.q + (m0 + i0 + r) * p.q_tok + h * p.q_head + c : p.q;
    flash::cp16(Qs + sw128_off<kFaBQ>(r, c), src, valid);
  }
  const auto load_kv = [&](int t, int buf) {
    const int64_t k0 = int64_t(t) * kFaBK;
    bf16* ks = Ks + buf * kFaBK * DK;
    bf16* vs = Vs + buf * kFaBK * DV;
    for (int idx = tid; idx < kFaBK * (DK / 8); idx += kFaThreads) {
      const int j = idx / (DK / 8), c = (idx % (DK / 8)) * 8;
      const int64_t m = m0 + k0 + j;
      const bool key = k0 + j < nkeys;
      const bf16* src = p.kv;
      bool valid = false;
      if (key && c < Dn) src = p.kv + m * p.ldkv + kvh + c, valid = true;
      else if (key && c < Dk) src = p.pe + m * p.pe_tok + (c - Dn), valid = true;
      flash::cp16(ks + sw128_off<kFaBK>(j, c), src, valid);
    }
    for (int idx = tid; idx < kFaBK * (DV / 8); idx += kFaThreads) {
      const int j = idx / (DV / 8), c = (idx % (DV / 8)) * 8;
      const bool valid = k0 + j < nkeys && c < Dv;
      const bf16* src = valid ? p.kv + (m0 + k0 + j) * p.ldkv + kvh + Dn + c : p.kv;
      flash::cp16(vs + sw128_off<kFaBK>(j, c), src, valid);
    }
  };
  load_kv(0, 0);
  flash::cp_commit();

  const int g = lane / 4, t4 = lane % 4;
  const int wrow0 = wg * 64;                 // the warpgroup's first row in the tile
  const int row0 = wrow0 + (warp % 4) * 16;  // the warp's first row
  const int64_t qi0 = i0 + row0 + g, qi1 = qi0 + 8;
  const bool wg_active = wrow0 < nq;
  // key tiles 0 .. nt_w - 1 reach the warpgroup's rows (its last row's tile, or the sequence's last)
  const int nt_w = wg_active ? min(ntiles, int((i0 + wrow0 + 63) / kFaBK) + 1) : 0;
  float acc[DV / 64][8][4];
#pragma unroll
  for (int hh = 0; hh < DV / 64; ++hh)
#pragma unroll
    for (int n = 0; n < 8; ++n) acc[hh][n][0] = acc[hh][n][1] = acc[hh][n][2] = acc[hh][n][3] = 0.f;
  float mx0 = -INFINITY, mx1 = -INFINITY, l0 = 0.f, l1 = 0.f;
  uint32_t pf[kFaBK / 16][4];  // P of the previous tile, the A operand of its P V
  // Q rows of this warpgroup: 64-row slab of every column atom (atoms kFaBQ rows apart)
  const uint64_t dQ = wgmma::desc_sw128(Qs + sw128_off<kFaBQ>(wrow0, 0));

  for (int t = 0; t < ntiles; ++t) {
    flash::cp_wait<0>();  // tile t (and at t = 0 Q): the only group in flight
    fence_proxy_async();  // this thread's cp.async writes, visible to the wgmmas after the barrier
    __syncthreads();      // also: every warpgroup is past iteration t - 1, so buffer (t + 1) % 3 is free
    if (t + 1 < ntiles) {
      load_kv(t + 1, (t + 1) % kFaStages);
      flash::cp_commit();
    }
    if (t < nt_w) {
      const int64_t k0 = int64_t(t) * kFaBK;
      float s[8][4];
      fa3::issue_s<DK, kFaBQ>(s, dQ, wgmma::desc_sw128(Ks + (t % kFaStages) * kFaBK * DK));
      if (t > 0) {
        fa3::issue_pv<DV>(acc, pf, wgmma::desc_sw128(Vs + ((t - 1) % kFaStages) * kFaBK * DV));
        wgmma::wait<1>();  // S_t done; P_{t-1} V_{t-1} may still run
      } else {
        wgmma::wait<0>();
      }
      wgmma::fence_operands(s);
      float al0, al1;
      fa3::softmax_tile(s, mx0, mx1, l0, l1, al0, al1, k0 + kFaBK - 1 > i0 + row0, k0, t4, qi0, qi1, p.scale_log2);
      wgmma::wait<0>();  // P_{t-1} V_{t-1} done: acc and pf are free
#pragma unroll
      for (int hh = 0; hh < DV / 64; ++hh) wgmma::fence_operands(acc[hh]);
      wgmma::fence_operands(pf);
#pragma unroll
      for (int hh = 0; hh < DV / 64; ++hh)
#pragma unroll
        for (int n = 0; n < 8; ++n)
          acc[hh][n][0] *= al0, acc[hh][n][1] *= al0, acc[hh][n][2] *= al1, acc[hh][n][3] *= al1;
      fa3::pack_p(pf, s);
      if (t == nt_w - 1) {  // the warpgroup's last tile: its P V now, before buffer t % 3 is refilled
        fa3::issue_pv<DV>(acc, pf, wgmma::desc_sw128(Vs + (t % kFaStages) * kFaBK * DV));
        wgmma::wait<0>();
#pragma unroll
        for (int hh = 0; hh < DV / 64; ++hh) wgmma::fence_operands(acc[hh]);
        wgmma::fence_operands(pf);
      }
    }
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
