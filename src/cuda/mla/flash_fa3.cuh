// src/cuda/mla/flash_fa3.cuh: the fused causal attention of mla_prefill (flash.cuh's math, parameters and global
// layouts) on Hopper warpgroup MMA with the FlashAttention-3 schedule: the default fused kernel where its head sizes
// fit (options.h); flash.cuh (mma.sync) takes the others.
//
// Math and rounding: exactly flash.cuh's (S in fp32, online softmax in fp32 in base 2, P rounded to bf16 once, O
// accumulated in fp32); only the instructions and the order in which the products are issued and waited differ.
//
// Tiling: one CTA of 3 warpgroups per (tile of kFaBQ = 128 queries of one sequence, head): consumer warpgroup w
// (w = 0, 1; 240 registers after setmaxnreg) owns query rows 64w .. 64w + 63 and runs key tiles 0 .. last_w (its
// last row's tile: causal), so consumer 0 may stop one tile before consumer 1; warpgroup 2 is the producer (24
// registers; one thread issues every tensor-map box). Per consumer, intra-warpgroup pipelining: the S of key tile t
// is issued before the P V of tile t - 1, and the softmax of tile t runs while that P V is on the tensor cores:
//   t = 0:      S_0 = Q K_0^T; wait; softmax(S_0) -> P_0 (bf16 registers), alpha_0 (acc is 0)
//   t = 1 ..:   issue S_t = Q K_t^T (group a); issue O += P_{t-1} V_{t-1} (group b);
//               wait<1> (a done); softmax(S_t) -> m, l, alpha_t in registers;
//               wait<0> (b done; release tile t - 1's stage); O *= alpha_t; P_t = bf16(p_t)
//   last:       issue O += P_last V_last; wait<0>; release its stage
// S_t and P_{t-1} live in different registers (s, pf); O is rescaled only after the group that writes it has
// completed (fence_operands pins the order).
// Ping-pong of the consumers (named barriers kFaBarIssue + w, 256 threads): slot t of warpgroup w (t = 0 ..
// ntiles: S_t and P_{t-1} V_{t-1} for t < nt_w, the last P V at t = nt_w, nothing later) is bar.sync on its own
// barrier, the wgmma issue, then bar.arrive on the other's once S_t has completed (P_{t-1} V_{t-1} still runs), so
// the warpgroups issue in turn (0, 1, 0, 1, ..) and the tensor cores run one warpgroup's wgmmas while the other
// does its softmax. Both run ntiles + 1 slots; warpgroup 1 opens with an arrival on barrier 0 and warpgroup 0
// closes with one more bar.sync on it, so each bar.sync meets exactly one bar.arrive of the other warpgroup, in
// order (an arrival of slot t + 1 needs the other's slot t), and none is left at exit.
//
// K / V ring of kFaStages = 3 stages, each K [DK / 64][kFaBK][64] and V [DV / 64][kFaBK][64] (one 64 x 64 box per
// swizzle atom: K's k_nope atoms from the kv map at column h (Dn + Dv) + c, its k_pe atoms from the k_pe map, V's
// from the kv map at h (Dn + Dv) + Dn + c; rows m0 + 64 t ..; rows past the tensor are zero-filled, rows past the
// sequence (the next sequence's keys, finite) are masked to p = 0 by the causal mask, as every key past the tile's
// last query is). mbarriers per stage (bulk_copy.cuh protocol):
//   full[s]:  1 arrival (the producer's expect_tx of the stage's bytes) + the boxes' bytes; use u of stage s is key
//             tile t = 3 u + s, waited with parity u & 1 by every consumer thread.
//   empty[s]: kFaConsumerWarps = 8 arrivals, lane 0 of each consumer warp once its warpgroup's wgmmas reading the
//             stage have completed (wait<0>); tiles past a warpgroup's rows are released by it once landed (so every
//             use gets all 8); the producer waits use u - 1's phase (parity (u - 1) & 1) before refilling use u.
// Q is loaded once by the consumers (cp.async, rows past the tile zero), made visible to the async proxy by
// fence_proxy_async before a named barrier (kFaBarQ) of the 256 consumer threads.
//
// Shared memory (1024-byte aligned, wgmma.cuh's 128-byte swizzle, atom-major): Q [kFaBQ][DK], K [3][kFaBK][DK],
// V [3][kFaBK][DV], 6 mbarriers: 168 KB + slack at DK = 192, DV = 128. Conditions: flash.cuh's, and Dn, P, Dv
// multiples of 64 with (Dn + P, Dv) = (DK, DV) (no padded columns: TMA never writes them); the epilogue as in
// flash.cuh.
#pragma once

#include <cuda.h>  // CUtensorMap
#include <cuda_bf16.h>

#include <cstdint>

#include "cuda/bulk_copy.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/mla/flash.cuh"
#include "cuda/wgmma.cuh"

namespace kimi::cuda::mla {

// 2 consumer warpgroups (64 query rows each) and 1 producer warpgroup; register budgets per thread after setmaxnreg
// (2 x 128 x 240 + 128 x 24 <= 64 K registers).
inline constexpr int kFaBQ = 128, kFaBK = 64, kFaStages = 3, kFaConsumers = 2, kFaConsumerWarps = 4 * kFaConsumers,
                     kFaThreads = 128 * (kFaConsumers + 1), kFaConsumerRegs = 240, kFaProducerRegs = 24;
// Named barrier ids: 1 = the consumers' Q barrier; kFaBarIssue + w = warpgroup w's turn to issue wgmmas (ping-pong).
inline constexpr int kFaBarQ = 1, kFaBarIssue = 2;

template <int DK, int DV>
constexpr size_t flash_fa3_smem_bytes() {
  return sizeof(__nv_bfloat16) * (size_t(kFaBQ) * DK + kFaStages * size_t(kFaBK) * (DK + DV)) +
         2 * kFaStages * sizeof(uint64_t) + 1024;
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

// Named barriers of the two consumer warpgroups (256 threads): bar_sync waits (128 threads of one warpgroup) for
// the other warpgroup's bar_arrive (its 128 threads) on the same id.
__device__ __forceinline__ void bar_sync(int id) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(kFaConsumers * 128) : "memory");
}
__device__ __forceinline__ void bar_arrive(int id) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "n"(kFaConsumers * 128) : "memory");
}

}  // namespace fa3

// Kernel parameters: flash.cuh's, and the tensor maps of the producer's boxes (both 2-d, 128B swizzle, box 64 x 64,
// zero fill outside the tensor): kv [M][H (Dn + Dv)] (row stride ldkv), k_pe [M][P] (row stride pe_tok).
struct Fa3Params {
  FlashParams p;
  CUtensorMap kv_map, pe_map;
};

// Needs Dn, P, Dv multiples of 64 with (Dn + P, Dv) = (DK, DV): K and V tiles of whole swizzle atoms, no padded
// columns (the launcher checks; prefill_flash.cu fa3_applies).
template <int DK, int DV>
__global__ void __launch_bounds__(kFaThreads, 1) mla_flash_fa3_kernel(const __grid_constant__ Fa3Params a) {
  static_assert(DK % 64 == 0 && DV % 64 == 0, "whole 64-column swizzle atoms");
  using bf16 = __nv_bfloat16;
  using wgmma::sw128_off;
  const FlashParams& p = a.p;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char* const smem = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  bf16* Qs = reinterpret_cast<bf16*>(smem);
  bf16* Ks = Qs + kFaBQ * DK;              // [kFaStages][DK / 64][kFaBK][64]
  bf16* Vs = Ks + kFaStages * kFaBK * DK;  // [kFaStages][DV / 64][kFaBK][64]
  uint64_t* full = reinterpret_cast<uint64_t*>(Vs + kFaStages * kFaBK * DV);  // [kFaStages]
  uint64_t* empty = full + kFaStages;                                         // [kFaStages]

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wg = __shfl_sync(0xffffffffu, tid / 128, 0);  // warp-uniform as ptxas sees it
  const int h = blockIdx.y;
  const int64_t m0 = p.tiles[3 * blockIdx.x], i0 = p.tiles[3 * blockIdx.x + 1];
  const int nq = int(p.tiles[3 * blockIdx.x + 2]);
  const int Dn = p.Dn, Dv = p.Dv;
  const int64_t nkeys = i0 + nq;
  const int ntiles = int((nkeys + kFaBK - 1) / kFaBK);
  if (tid == 0) {
    for (int s = 0; s < kFaStages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], kFaConsumerWarps);
    }
    mbar_init_fence();
  }
  __syncthreads();

  if (wg == kFaConsumers) {  // producer warpgroup: one thread issues every box
    wgmma::regs_dec<kFaProducerRegs>();
    if (tid == kFaConsumers * 128) {
      tma_prefetch_map(&a.kv_map);
      tma_prefetch_map(&a.pe_map);
      const int ckv = h * (Dn + Dv);  // head h's first kv column
      for (int t = 0; t < ntiles; ++t) {
        const int st = t % kFaStages;
        if (t >= kFaStages) mbar_wait(&empty[st], uint32_t((t / kFaStages - 1) & 1));  // use t / 3 - 1 released
        mbar_expect_tx(&full[st], uint32_t(sizeof(bf16) * kFaBK * (DK + DV)));
        const int row = int(m0 + int64_t(t) * kFaBK);  // keys past the sequence: masked (p = 0) or zero filled
        bf16* ks = Ks + st * kFaBK * DK;
        bf16* vs = Vs + st * kFaBK * DV;
        // the atom of columns c .. c + 63: kFaBK x 64 elements at (c / 64) kFaBK 64
        for (int c = 0; c < Dn; c += 64) tma_load_2d(ks + (c / 64) * kFaBK * 64, &a.kv_map, ckv + c, row, &full[st]);
        for (int c = Dn; c < DK; c += 64) tma_load_2d(ks + (c / 64) * kFaBK * 64, &a.pe_map, c - Dn, row, &full[st]);
        for (int c = 0; c < DV; c += 64)
          tma_load_2d(vs + (c / 64) * kFaBK * 64, &a.kv_map, ckv + Dn + c, row, &full[st]);
      }
    }
    return;
  }
  wgmma::regs_inc<kFaConsumerRegs>();

  // Q by the consumers' cp.async (rows past the tile zero), visible to the wgmmas after the consumers' barrier
  for (int idx = tid; idx < kFaBQ * (DK / 8); idx += kFaConsumers * 128) {
    const int r = idx / (DK / 8), c = (idx % (DK / 8)) * 8;
    const bool valid = r < nq;
    const bf16* src = valid ? p.q + (m0 + i0 + r) * p.q_tok + h * p.q_head + c : p.q;
    flash::cp16(Qs + sw128_off<kFaBQ>(r, c), src, valid);
  }
  flash::cp_commit();
  flash::cp_wait<0>();
  fence_proxy_async();
  fa3::bar_sync(kFaBarQ);

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

  // Ping-pong (header): slot t = bar.sync on the own issue barrier, wgmma issue, bar.arrive on the other's (after
  // the wait for S_t: a bar.arrive between a wgmma issue and its wait makes ptxas serialize the wgmmas, C7514).
  const int nslots = ntiles + 1;
  const auto issue_begin = [&] { fa3::bar_sync(kFaBarIssue + wg); };
  const auto issue_end = [&] { fa3::bar_arrive(kFaBarIssue + 1 - wg); };
  if (wg == 1) fa3::bar_arrive(kFaBarIssue);
  for (int t = 0; t < nslots; ++t) {
    if (t < nt_w) {
      const int st = t % kFaStages, pst = (t + kFaStages - 1) % kFaStages;
      mbar_wait(&full[st], uint32_t((t / kFaStages) & 1));  // tile t has landed
      const int64_t k0 = int64_t(t) * kFaBK;
      float s[8][4];
      issue_begin();
      fa3::issue_s<DK, kFaBQ>(s, dQ, wgmma::desc_sw128(Ks + st * kFaBK * DK));
      if (t > 0) fa3::issue_pv<DV>(acc, pf, wgmma::desc_sw128(Vs + pst * kFaBK * DV));
      if (t > 0)
        wgmma::wait<1>();  // S_t done; P_{t-1} V_{t-1} may still run
      else
        wgmma::wait<0>();
      wgmma::fence_operands(s);
      issue_end();
      float al0, al1;
      fa3::softmax_tile(s, mx0, mx1, l0, l1, al0, al1, k0 + kFaBK - 1 > i0 + row0, k0, t4, qi0, qi1, p.scale_log2);
      wgmma::wait<0>();  // P_{t-1} V_{t-1} done: acc and pf are free, and so is tile t - 1's stage
#pragma unroll
      for (int hh = 0; hh < DV / 64; ++hh) wgmma::fence_operands(acc[hh]);
      wgmma::fence_operands(pf);
      if (t > 0 && lane == 0) mbar_arrive(&empty[pst]);
#pragma unroll
      for (int hh = 0; hh < DV / 64; ++hh)
#pragma unroll
        for (int n = 0; n < 8; ++n)
          acc[hh][n][0] *= al0, acc[hh][n][1] *= al0, acc[hh][n][2] *= al1, acc[hh][n][3] *= al1;
      fa3::pack_p(pf, s);
      continue;
    }
    const bool last_pv = t == nt_w && nt_w > 0;  // the warpgroup's last tile's P V
    const int lst = (t + kFaStages - 1) % kFaStages;
    if (last_pv) {
      issue_begin();
      fa3::issue_pv<DV>(acc, pf, wgmma::desc_sw128(Vs + lst * kFaBK * DV));
      issue_end();
      wgmma::wait<0>();
#pragma unroll
      for (int hh = 0; hh < DV / 64; ++hh) wgmma::fence_operands(acc[hh]);
      wgmma::fence_operands(pf);
      if (lane == 0) mbar_arrive(&empty[lst]);
    } else {
      issue_begin();
      issue_end();
    }
    // a tile past the warpgroup's rows: released once landed (every stage use gets all kFaConsumerWarps arrivals)
    if (t < ntiles) {
      mbar_wait(&full[t % kFaStages], uint32_t((t / kFaStages) & 1));
      if (lane == 0) mbar_arrive(&empty[t % kFaStages]);
    }
  }
  if (wg == 0) issue_begin();  // meets warpgroup 1's last bar.arrive: no barrier is left half-arrived at exit

  if (!wg_active) return;
  const float inv0 = 1.f / flash::quad_sum(l0), inv1 = 1.f / flash::quad_sum(l1);
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
          flash::store_o(p, m, h, c, acc[hh][n][2 * half + e] * inv);
        }
  }
}

}  // namespace kimi::cuda::mla
