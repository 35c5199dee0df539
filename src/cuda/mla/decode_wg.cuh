// src/cuda/mla/decode_wg.cuh: the attend step of mla_decode (absorbed form, SPEC 6, kimi/ops/mla.h) on Hopper
// warpgroup MMA (wgmma, sm_90a) for a bf16 latent cache with R = 512, P = 64 (Kimi-Linear, K3): FlashMLA's schedule
// in this project's vocabulary (wgmma.cuh, bulk_copy.cuh). Same inputs, partial outputs and rounding as
// decode_tc.cuh (mma.sync), which keeps every other shape; decode_proj.cuh's absorb runs before it and its merge /
// project after it. Chosen by decode_options.h (MlaDecodePath::wgmma; not the default).
//
// Math (per sequence n, head h, split s; QL[n, h] = [q_lat | q_pe] bf16 from the absorb, cache row j = C_j =
// [c_j | k_pe_j], RP = R + P = 576 bf16):
//   score_hj = (QL_h . C_j) * scale                 (wgmma: bf16 products, f32 accumulate over the 576 columns)
//   per tile of kWgBJ = 64 rows, per head:
//     m' = max(m, max_j score_hj);  p_hj = bf16(exp(score_hj - m'));  alpha = exp(m - m')
//     l = l alpha + sum_j p_hj;     O_h = O_h alpha + sum_j p_hj c_j   [R]   (f32 accumulate)
//   Opart[n, s, h] = O_h (unnormalised), ML[n, s, h] = (m, l): decode_tc.cuh's partials, merged by decode_proj.cuh.
//   l sums the rounded p that multiply the rows. Rows past the split's end get p = 0 exactly (score -inf) and are
//   zeroed in shared memory before the P C product (a cache row past a sequence's length may hold anything).
//   Splits: decode_tc.cuh's rule with 64-row tiles: tps = ceil(ceil(len / 64) / S) tiles per split, split s owns
//   rows [64 s tps, ...) clipped to len; an empty split writes m = -inf, l = 0, O = 0.
//
// CTA (grid (head groups, S, N); 384 threads = 3 warpgroups, one CTA per SM):
//   warpgroup 2, the producer (24 registers after setmaxnreg): one thread loads the cache tiles by TMA;
//   warpgroups 0 and 1, the consumers (240 registers): consumer w computes the scores of tile rows [32 w, 32 w + 32)
//   for all 64 (padded) heads, and owns O columns [256 w, 256 w + 256) for all heads:
//     S_w [64 heads][32 rows]  = Q [64][576] C[32 w .. 32 w + 31]^T        36 x SS m64n32k16 (Q, C K-major)
//     row max of S_w -> red[w]; named barrier A (256 threads); m' = max(m, max(red[0], red[1])) in both (the same
//     expression, bit-identical m in both consumers); p = bf16(exp(S_w scale - m')) -> registers (the A fragments
//     of the RS wgmma) and Ps[:, 32 w ..] (for the other consumer); partial tile: zero C rows >= row1 in the own
//     columns; fence.proxy.async; named barrier B;
//     O_w = O_w alpha + P_w C[32 w .., cols w]  (RS, 2 k-steps x 4 x m64n64k16, C MN-major)
//                     + P_1-w C[32 (1 - w) .., cols w]  (SS, A = Ps K-major, 2 k-steps x 4 x m64n64k16)
//   then a wait for the group and the stage's release. The heads of a group (HG <= 64) fill the 64 wgmma rows; rows
//   >= HG have zero queries and are not stored. l: each consumer sums its own p per thread, quad-summed at the end;
//   the partial l = l_0 + l_1 (that order; consumer 1's through shared memory).
//
// Shared memory (1024-byte aligned base; wgmma.cuh 128-byte swizzle, atom-major [cols / 64][rows][64]):
//   Qs  bf16 [9][64][64]      73,728 B   the group's queries (cp.async by the consumers, rows >= HG zero)
//   Cs  bf16 [2][9][64][64]  147,456 B   the cache ring: tile t in stage t % 2, one TMA box (64 x 64) per atom
//   Ps  bf16 [1][64][64]       8,192 B   p of the tile: columns [32 w, 32 w + 32) written by consumer w
//   red f32 [2][64], lsum f32 [64], full / empty mbarriers [2] each: 230,176 B + 1,024 alignment slack <= 227 KB.
//
// Barrier protocol:
//   full[st]  (1 arrival: the producer's expect_tx of the 9 boxes' bytes, + the bytes): use u = tile 2 u + st,
//             waited with parity u & 1 by every consumer thread.
//   empty[st] (8 arrivals: lane 0 of each consumer warp after its wgmma group of the tile has completed): the
//             producer waits use u - 1 (parity (u - 1) & 1) before loading tile 2 u + st. Every consumer warp runs
//             every tile, so each use gets all 8 arrivals.
//   named barriers (256 consumer threads): kWgBarQ (queries landed and fenced for the async proxy), kWgBarA (each
//   consumer's S wgmma has completed and its red written; after it: red read, the partial tile's rows zeroed), kWgBarB
//   (Ps and the zeroed rows written and fenced), kWgBarL (consumer 1's l in lsum). Reuse across tiles: red[w] and
//   Ps[:, 32 w ..] of tile t + 1 are written after barrier A(t + 1), which the other consumer reaches only after its
//   tile-t reads of them (red: before B(t); Ps: its P C group completed by wait<0>). The zeroing of a stage happens
//   after A, when both consumers' S wgmmas reading that stage have completed, and before B, which orders it before
//   both P C products.
// Launch (pdl.cuh, programmatic after the absorb): the producer reads the index and loads the cache before any
//   wait (written by earlier steps, complete once this grid may start: the absorb triggers its dependents after its
//   own pdl_wait), the consumers wait before reading QL and writing the partials.
// Registers per consumer thread: O 4 x 8 x 4 = 128 f32, S 16, P fragments 8, softmax state 4, addresses.
// Precision: decode_tc.cuh's (bf16 QL, cache and p; f32 accumulation in the tensor cores' order); the bar is
// docs/ops/mla.md "CUDA decode" (relative RMS <= 5e-3). Fixed order everywhere, no atomics: bit-identical replays.
#pragma once

#include <cuda.h>  // CUtensorMap
#include <cuda_bf16.h>

#include <cstdint>

#include "cuda/bulk_copy.cuh"
#include "cuda/index.cuh"
#include "cuda/mla/decode_tc.cuh"
#include "cuda/pdl.cuh"
#include "cuda/wgmma.cuh"

namespace kimi::cuda::mla {

inline constexpr int kWgBJ = 64, kWgStages = 2, kWgR = 512, kWgRP = 576, kWgKA = kWgRP / 64, kWgMaxHG = 64;
inline constexpr int kWgThreads = 384, kWgConsumerWarps = 8, kWgConsumerRegs = 240, kWgProducerRegs = 24;
inline constexpr int kWgBarQ = 1, kWgBarA = 2, kWgBarB = 3, kWgBarL = 4;

// Byte offsets of the shared-memory parts from the 1024-byte aligned base.
struct WgSmem {
  static constexpr size_t kAtom = 64 * 64 * 2;  // one 64 x 64 bf16 swizzle block
  static constexpr size_t qs = 0, cs = qs + kWgKA * kAtom, ps = cs + kWgStages * kWgKA * kAtom, red = ps + kAtom,
                          lsum = red + 2 * 64 * 4, bars = lsum + 64 * 4, end = bars + 2 * kWgStages * 8,
                          total = end + 1024;
};
static_assert(WgSmem::total <= 227 * 1024, "one CTA within the sm_90 per-block shared memory");

struct WgParams {
  const __nv_bfloat16* QL;  // [N, H, 576] bf16 (decode_proj.cuh's absorb)
  const int64_t* lens;      // [N] (host-built table), or null: dlens / dslots
  const int64_t* slots;     // [N]
  DevIndex dlens, dslots;   // the device form: a length outside [1, L] or a slot outside [0, Nc) -> 0 rows
  int64_t Nc, L;
  float* Opart;  // [N, S, H, 512]
  float* ML;     // [N, S, H, 2]
  int H, HG, S;
  float scale;
};
// The kernel's argument: the parameters and the cache's tensor map (3-d [Nc][L][576] bf16, box 64 x 64 x 1,
// 128-byte swizzle, zero fill outside).
struct WgArgs {
  WgParams p;
  CUtensorMap cache_map;
};

namespace wg {

__device__ __forceinline__ void bar_sync(int id) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(2 * 128) : "memory");
}
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Sequence n's (length, slot): the host table, or the device form range-checked (0 rows where out of range).
__device__ __forceinline__ void seq_of(const WgParams& p, int64_t n, int64_t& len, int64_t& slot) {
  if (p.lens) {
    len = p.lens[n], slot = p.slots[n];
    return;
  }
  len = p.dlens[n], slot = p.dslots[n];
  if (len < 1 || len > p.L || slot < 0 || slot >= p.Nc) len = 0, slot = 0;
}

// S [64][32] = Q C_half^T over the 576 columns: 36 SS wgmmas, one group (both operands K-major, 64-row atoms).
__device__ __forceinline__ void issue_s(float (&s)[4][4], uint64_t dQ, uint64_t dC) {
#pragma unroll
  for (int j = 0; j < 4; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
  wgmma::fence();
#pragma unroll
  for (int ks = 0; ks < kWgKA * 4; ++ks) {
    const uint32_t off = uint32_t((ks / 4) * WgSmem::kAtom + (ks % 4) * 32);
    wgmma::mma<32, 0, 0>(s, wgmma::desc_add(dQ, off), wgmma::desc_add(dC, off));
  }
  wgmma::commit();
}

}  // namespace wg

__global__ void __launch_bounds__(kWgThreads, 1) mla_attend_wg_kernel(const __grid_constant__ WgArgs a) {
  using bf16 = __nv_bfloat16;
  using wgmma::sw128_off;
  const WgParams& p = a.p;
  extern __shared__ __align__(128) unsigned char wg_smem_raw[];
  unsigned char* const sm = wg_smem_raw + ((1024u - (smem_u32(wg_smem_raw) & 1023u)) & 1023u);
  bf16* Qs = reinterpret_cast<bf16*>(sm + WgSmem::qs);     // [9][64][64]
  bf16* Cs = reinterpret_cast<bf16*>(sm + WgSmem::cs);     // [2][9][64][64]
  bf16* Ps = reinterpret_cast<bf16*>(sm + WgSmem::ps);     // [64][64]
  float* red = reinterpret_cast<float*>(sm + WgSmem::red);  // [2][64]
  float* lsum = reinterpret_cast<float*>(sm + WgSmem::lsum);  // [64]
  uint64_t* full = reinterpret_cast<uint64_t*>(sm + WgSmem::bars);
  uint64_t* empty = full + kWgStages;
  constexpr int kStageElems = kWgKA * 64 * 64;

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wgi = __shfl_sync(0xffffffffu, tid / 128, 0);  // warp-uniform as ptxas sees it
  const int h0 = blockIdx.x * p.HG, hn = p.H - h0 < p.HG ? p.H - h0 : p.HG;  // the group's heads [h0, h0 + hn)
  const int s = blockIdx.y;
  const int64_t n = blockIdx.z;
  int64_t len = 0, slot = 0;
  wg::seq_of(p, n, len, slot);  // written before this call's absorb (host table, caller's index): before pdl_wait
  const int64_t ntile_seq = (len + kWgBJ - 1) / kWgBJ;
  const int64_t tps = (ntile_seq + p.S - 1) / p.S;
  const int64_t row0 = int64_t(s) * tps * kWgBJ;
  const int64_t row1 = row0 + tps * kWgBJ < len ? row0 + tps * kWgBJ : len;  // may be <= row0: an empty split
  const int nt = row1 > row0 ? int((row1 - row0 + kWgBJ - 1) / kWgBJ) : 0;

  if (tid == 0) {
    for (int st = 0; st < kWgStages; ++st) {
      mbar_init(&full[st], 1);
      mbar_init(&empty[st], kWgConsumerWarps);
    }
    mbar_init_fence();
  }
  __syncthreads();

  if (wgi == 2) {  // producer: one thread issues every box
    wgmma::regs_dec<kWgProducerRegs>();
    pdl_launch_dependents();
    if (tid == 256) {
      tma_prefetch_map(&a.cache_map);
      for (int t = 0; t < nt; ++t) {
        const int st = t % kWgStages;
        if (t >= kWgStages) mbar_wait(&empty[st], uint32_t((t / kWgStages - 1) & 1));  // use t / 2 - 1 released
        mbar_expect_tx(&full[st], uint32_t(kStageElems * sizeof(bf16)));
        const int row = int(row0 + int64_t(t) * kWgBJ);  // rows past L: zero filled; past row1: masked, zeroed
        for (int c = 0; c < kWgKA; ++c)
          tma_load_3d(Cs + st * kStageElems + c * 64 * 64, &a.cache_map, 64 * c, row, int(slot), &full[st]);
      }
    }
    return;
  }
  wgmma::regs_inc<kWgConsumerRegs>();
  const int w = wgi, ctid = tid % 128, g = lane / 4, t4 = lane % 4;

  // The group's queries (rows >= hn zero), visible to the wgmmas after the consumers' barrier.
  pdl_wait();  // QL (and Opart / ML, stream-ordered scratch) after the absorb
  {
    constexpr int cpr = kWgRP / 8;  // 16-byte chunks per query row
    for (int idx = tid; idx < 64 * cpr; idx += 256) {
      const int r = idx / cpr, c = (idx % cpr) * 8;
      const bool valid = r < hn;
      tc_cp_async16(Qs + sw128_off<64>(r, c), p.QL + ((n * p.H + h0 + (valid ? r : 0)) * int64_t(kWgRP) + c), valid);
    }
    tc_cp_commit();
  }
  pdl_launch_dependents();
  tc_cp_wait<0>();
  fence_proxy_async();
  wg::bar_sync(kWgBarQ);

  const int rw = 16 * (warp % 4) + g;  // the thread's rows rw, rw + 8 of the 64 (heads)
  float acc[4][8][4];                  // O_w [64][256]: atom a, n8 block j, fragment e (wgmma.cuh layout)
#pragma unroll
  for (int a4 = 0; a4 < 4; ++a4)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[a4][j][0] = acc[a4][j][1] = acc[a4][j][2] = acc[a4][j][3] = 0.f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;  // rows rw, rw + 8; l: this thread's columns
  const uint64_t dQ = wgmma::desc_sw128(Qs);
  const uint64_t dP = wgmma::desc_sw128(Ps);

  for (int t = 0; t < nt; ++t) {
    const int st = t % kWgStages;
    const int64_t j0 = row0 + int64_t(t) * kWgBJ;
    bf16* ct = Cs + st * kStageElems;
    mbar_wait(&full[st], uint32_t((t / kWgStages) & 1));  // tile t has landed

    // S_w = Q C[32 w ..]^T: rows 32 w .. of every atom (32 w x 128 bytes: a multiple of 1024, the swizzle's phase).
    float sc[4][4];
    wg::issue_s(sc, dQ, wgmma::desc_sw128(ct + 32 * w * 64));
    wgmma::wait<0>();
    wgmma::fence_operands(sc);

    // Scale and mask (tile row 32 w + 8 j + 2 t4 + e % 2), the row max of the half -> red[w].
    float tm0 = -INFINITY, tm1 = -INFINITY;
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const bool valid = j0 + 32 * w + 8 * j + 2 * t4 + e < row1;
        sc[j][e] = valid ? sc[j][e] * p.scale : -INFINITY;
        sc[j][2 + e] = valid ? sc[j][2 + e] * p.scale : -INFINITY;
        tm0 = fmaxf(tm0, sc[j][e]), tm1 = fmaxf(tm1, sc[j][2 + e]);
      }
    tm0 = wg::quad_max(tm0), tm1 = wg::quad_max(tm1);
    if (t4 == 0) red[w * 64 + rw] = tm0, red[w * 64 + rw + 8] = tm1;
    wg::bar_sync(kWgBarA);

    // m' (the same expression in both consumers), alpha, p = bf16(exp(s - m')) (masked: exp(-inf) = 0).
    const float mn0 = fmaxf(m0, fmaxf(red[rw], red[64 + rw])), mn1 = fmaxf(m1, fmaxf(red[rw + 8], red[64 + rw + 8]));
    const float al0 = __expf(m0 - mn0), al1 = __expf(m1 - mn1);  // m = -inf at the first tile: 0
    m0 = mn0, m1 = mn1;
    float sum0 = 0.f, sum1 = 0.f;
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        sc[j][e] = tc_bf16_round(__expf(sc[j][e] - mn0));
        sc[j][2 + e] = tc_bf16_round(__expf(sc[j][2 + e] - mn1));
        sum0 += sc[j][e], sum1 += sc[j][2 + e];
      }
    l0 = l0 * al0 + sum0, l1 = l1 * al1 + sum1;
    uint32_t pf[2][4];  // P_w as the A fragments of k-steps 0, 1 (tile rows 32 w + 16 kk ..; wgmma.cuh mma_rs)
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      pf[kk][0] = tc_pack(sc[2 * kk][0], sc[2 * kk][1]);
      pf[kk][1] = tc_pack(sc[2 * kk][2], sc[2 * kk][3]);
      pf[kk][2] = tc_pack(sc[2 * kk + 1][0], sc[2 * kk + 1][1]);
      pf[kk][3] = tc_pack(sc[2 * kk + 1][2], sc[2 * kk + 1][3]);
    }
    // P_w into Ps for the other consumer: (head rw (+ 8), tile row 32 w + 8 j + 2 t4, + 1).
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int c = 32 * w + 8 * j + 2 * t4;
      *reinterpret_cast<uint32_t*>(Ps + sw128_off<64>(rw, c)) = pf[j / 2][2 * (j % 2)];
      *reinterpret_cast<uint32_t*>(Ps + sw128_off<64>(rw + 8, c)) = pf[j / 2][2 * (j % 2) + 1];
    }
    // A partial tile: rows >= row1 - j0 of this consumer's latent columns [256 w, 256 w + 256) to zero (the S
    // wgmmas that read them have completed: barrier A).
    if (j0 + kWgBJ > row1) {
      const int v = int(row1 - j0);
      for (int idx = ctid; idx < (kWgBJ - v) * 32; idx += 128) {  // 16-byte chunks: 32 per row of 256 columns
        const int r = v + idx / 32, c = 256 * w + (idx % 32) * 8;
        *reinterpret_cast<uint4*>(ct + (c / 64) * 64 * 64 + sw128_off<64>(r, c % 64)) = make_uint4(0, 0, 0, 0);
      }
    }
    fence_proxy_async();
    wg::bar_sync(kWgBarB);

    // O_w = O_w alpha + P_w C[32 w .., cols] (RS) + P_1-w C[32 (1 - w) .., cols] (SS); C MN-major: atom 4 w + a4,
    // k-step of 16 tile rows = 2048 bytes.
    // NOTE: skipped where every alpha of the warp is exactly 1 (no row's max moved; __expf(0) = 1): x * 1 = x,
    // bit-identical, and the 128 multiplies per thread would run while the tensor cores wait for this P C.
    if (__any_sync(0xffffffffu, al0 != 1.f || al1 != 1.f)) {
#pragma unroll
      for (int a4 = 0; a4 < 4; ++a4)
#pragma unroll
        for (int j = 0; j < 8; ++j)
          acc[a4][j][0] *= al0, acc[a4][j][1] *= al0, acc[a4][j][2] *= al1, acc[a4][j][3] *= al1;
    }
    // Pinned before the fence: the rescale and the packing may not sink below it (ptxas would then insert a
    // warpgroup.arrive of its own, C7519).
#pragma unroll
    for (int a4 = 0; a4 < 4; ++a4) wgmma::fence_operands(acc[a4]);
    wgmma::fence_operands(pf);
    const uint64_t dC = wgmma::desc_sw128(ct + (4 * w) * 64 * 64);
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < 2; ++kk)
#pragma unroll
      for (int a4 = 0; a4 < 4; ++a4)
        wgmma::mma_rs<64, 1>(acc[a4], pf[kk],
                             wgmma::desc_add(dC, uint32_t(a4 * WgSmem::kAtom + (2 * w + kk) * 2048)));
#pragma unroll
    for (int kk = 0; kk < 2; ++kk)
#pragma unroll
      for (int a4 = 0; a4 < 4; ++a4)
        wgmma::mma<64, 0, 1>(acc[a4], wgmma::desc_add(dP, uint32_t((2 * (1 - w) + kk) * 32)),
                             wgmma::desc_add(dC, uint32_t(a4 * WgSmem::kAtom + (2 * (1 - w) + kk) * 2048)));
    wgmma::commit();
    wgmma::wait<0>();
#pragma unroll
    for (int a4 = 0; a4 < 4; ++a4) wgmma::fence_operands(acc[a4]);
    wgmma::fence_operands(pf);
    if (lane == 0) mbar_arrive(&empty[st]);  // this warp is done with the stage (and with Ps / red of tile t)
  }

  // Partials: l = l_0 + l_1 (consumer 1's through lsum), O_w's columns, (m, l) by consumer 0.
  l0 = wg::quad_sum(l0), l1 = wg::quad_sum(l1);
  if (w == 1 && t4 == 0) lsum[rw] = l0, lsum[rw + 8] = l1;
  wg::bar_sync(kWgBarL);
  const int64_t base = (n * p.S + s) * int64_t(p.H);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int h = rw + 8 * half;
    if (h >= hn) continue;
    float* out = p.Opart + (base + h0 + h) * kWgR + 256 * w;
#pragma unroll
    for (int a4 = 0; a4 < 4; ++a4)
#pragma unroll
      for (int j = 0; j < 8; ++j)
        *reinterpret_cast<float2*>(out + a4 * 64 + 8 * j + 2 * t4) =
            make_float2(acc[a4][j][2 * half], acc[a4][j][2 * half + 1]);
    if (w == 0 && t4 == 0) {
      p.ML[(base + h0 + h) * 2] = half ? m1 : m0;
      p.ML[(base + h0 + h) * 2 + 1] = (half ? l1 : l0) + lsum[h];
    }
  }
}

}  // namespace kimi::cuda::mla
