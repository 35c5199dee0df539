// src/cuda/kda/walk_rs.cuh: kernel 2 of the chunkwise KDA prefill, the walk (chunk.cuh has the two-pass design, the
// math, the scratch and the segments): the state products in register-A form. One warpgroup keeps the whole fp32
// state tile of its (sequence, head, V tile) in the accumulators of the state update AND feeds it, as bf16 hi + lo A
// fragments in registers, to the next chunk's products, so that neither the state nor U goes through shared memory
// and no barrier separates two warpgroups on the per-chunk chain.
//
// kda_chunk_walk_rs<D> (grid N x H x D / 64, 256 threads, one CTA per (sequence, head, V tile of 64); reads Qg, A_qk,
// KdT, decay, Kg, Tb from the scratch, V from v (Params::v_in_walk) or the scratch). Per chunk c (t, s = chunk rows,
// v = the tile's 64 value columns, k = key channels), everything transposed (rows v):
//   WG 1 (loads, Wn)  chunk c's operands -> stage c & 1 by bulk copies (V from v by cp.async); Wn(c) = -Tb Kg
//                     (m64 t x n D k, k = 64 s; shared A and B) -> Wn hi (bf16) in the stage; then chunk c + 1's loads
//                     into the other stage once WG 0 has released it (chunk c - 1 done).
//   WG 0 (the chain)      S^T <- S^T diag(exp(GC))  (its fragments Sh, Sl were taken at the end of chunk c - 1;
//                          decayed while G1 ran, ptxas injected a wait for it)
//                     G1  U^T = S^T Wn^T + V^T Tb^T              (m64 v x n64 t; S^T from registers: Sh Wh + Sl Wh,
//                          k = D; V^T from shared memory (MN-major), k = 64 s)
//                         O^T = S^T Qg^T                          (m64 v x n64 t; Sh only, k = D), its wgmma
//                          alternating with U's (two accumulator chains in flight)
//                     wait; U^T -> hi + lo A fragments (registers)
//                     G2  O^T += U^T A_qk^T                       (k = 64 s), alternating with
//                         S^T += U^T KdT^T                        (m64 v x n D k, k = 64 t: the state update)
//                     wait; release the stage; O(c) -> o by the O epilogue; S^T -> hi + lo A fragments for chunk c + 1.
// O epilogue (Params::o_rows16, chunk.cu): a bf16 o with 16-byte aligned rows goes through the O stage (stmatrix.trans,
// WG 1 stores it 16 bytes a piece while WG 0 runs chunk c + 1); any other o (fp32 as the model writes it, f16,
// unaligned rows) by per-element stores from WG 0 (store_1), on the chain.
// The tensor work per chunk (D = 128) is 20 + 8 + 8 + 16 m64n64k16-equivalents on WG 0 and 8 on WG 1, all of WG 0's
// in one dependent sequence: the walk's floor is that sequence, ~1.7 K cycles at the full tensor rate. Measured why
// this form (H200, 1 x 16384 H64): walk 484 us under ncu (docs/gpu/2026-11-30-h200-run64.txt); the three-warpgroup
// form with U and S split through shared memory took ~6.6 K cycles a chunk (docs/ops/kda.md).
// Segments (chunk.cuh "Segments"; grid units x H x D / 64, twice that in phase 1): the CTA's WalkUnit says where its
// state starts and ends and what it computes; a unit without outputs (a segment map) loads neither Qg nor A_qk and
// skips the O products and stores, an identity-column unit also the V term (U0 = 0): the chain is instantiated for
// the three cases (kOuts, kVterm). A map chunk costs ~0.8 of a chunk with outputs (src/cuda/kda/segment_plan.cpp).
// Precision (fp32 accumulation throughout): the state update and O's intra-chunk term take U as bf16 hi + lo; U's
// state term takes S as hi + lo but Wn as bf16 (hi) only, and O's state term S as bf16 (hi) only: 52 tensor units a
// chunk instead of 68 with every lo product. Both dropped products are one bf16 rounding of a factor (relative RMS
// ~2^-9 / sqrt 3 of the term they correct); measured against fp64 on the cases of KdaCudaShapes: o 3.21 / 2.23 /
// 2.81 / 3.32e-3 against 3.18 / 2.10 / 2.76 / 3.27e-3 with all 68, the final state unchanged
// (docs/gpu/2026-11-30-h200-run62.txt); the walk 6-8% faster (docs/gpu/2026-11-30-h200-run64.txt).
// Registers (ptxas, CUDA 13.0): 255 at D = 128 (WG 0: the state 64, its fragments 64, U 32 and its fragments 32, O 32),
// 183 at 64, no spills.
//
// Shared memory (D = 128), two stages of every operand of a chunk, each tile 128B-swizzled atom-major (wgmma.cuh):
//   Qg [D / 64][64 t][64 k], KdT [1][D k][64 t], Kg [D / 64][64 s][64 k], Wn hi [D / 64][64 t][64 k], A_qk, Tb,
//   V [1][64][64], decay [D]; the O stage bf16 [64 t][64 v]; eight mbarriers. RsSmem<D>::TOTAL bytes (191552 at
//   D = 128).
#pragma once

#include "cuda/kda/chunk.cuh"
#include "cuda/wgmma.cuh"

namespace kimi::cuda::kda_chunk {

constexpr int kRsThreads = 256;  // WG 0: the chain; WG 1: loads and Wn

template <int D>
struct RsSmem {
  static constexpr int VT = 64;
  static constexpr size_t kTileD = size_t(kC) * D * 2;  // bf16 [64][D] or [D][64]
  static constexpr size_t kTile = size_t(kC) * VT * 2;  // bf16 [64][64]
  // one stage: every operand of one chunk
  static constexpr size_t QG = 0, KDT = QG + kTileD, KG = KDT + kTileD, WH = KG + kTileD;
  static constexpr size_t AQK = WH + kTileD, TB = AQK + kTile, V = TB + kTile, DEC = V + kTile;
  static constexpr size_t kStage = (DEC + size_t(D) * 4 + 1023) / 1024 * 1024;
  static constexpr size_t OST = 2 * kStage;    // O(c) bf16 [64 t][64 v], 128B-swizzled (Params::o_rows16)
  static constexpr size_t BAR = OST + kTile;   // full[2], wn[2], empty[2], o_ready, o_free
  static constexpr size_t TOTAL = BAR + 8 * 8 + 1024;  // + base alignment slack
  // bytes of one stage's bulk copies: KdT, Kg, Tb, decay; Qg and A_qk for a unit with outputs; V when it comes
  // from the scratch
  static constexpr uint32_t load_bytes(bool outs, bool v_from_scratch) {
    return uint32_t(2 * kTileD + kTile + size_t(D) * 4 + (outs ? kTileD + kTile : 0) + (v_from_scratch ? kTile : 0));
  }
  static_assert(D == 64 || D == 128, "head sizes");
  static_assert(KDT % 1024 == 0 && KG % 1024 == 0 && WH % 1024 == 0 && AQK % 1024 == 0 &&
                    TB % 1024 == 0 && V % 1024 == 0 && DEC % 16 == 0 && kStage % 1024 == 0,
                "swizzle atoms 1024-byte aligned");
  static_assert(TOTAL <= 227 * 1024, "fits the sm_90 shared memory of one CTA");
};
static_assert(RsSmem<128>::TOTAL == 191552, "documented size");

// Accumulator n8 tiles t0, t1 (columns 16 k .. 16 k + 15 of a product) -> the bf16 hi + lo A fragments of k-step k
// of the next product (wgmma::mma_rs), the split of sts_split (hi = bf16(x), lo = split_lo).
__device__ __forceinline__ void a_frag_split(const float (&t0)[4], const float (&t1)[4], uint32_t (&hi)[4],
                                             uint32_t (&lo)[4]) {
  const float x[4][2] = {{t0[0], t0[1]}, {t0[2], t0[3]}, {t1[0], t1[1]}, {t1[2], t1[3]}};
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    hi[m] = pack_bf16(x[m][0], x[m][1]);
    lo[m] = split_lo(x[m][0], x[m][1], hi[m]);
  }
}

// The bf16 hi + lo split of a warpgroup accumulator tile acc[NJ][4] (times kSign: rows 16 w + gq + 8 (e / 2) of warp
// w, columns c0 + 8 j + 2 tq + e % 2) into two 128B-swizzled tiles of R rows, by stmatrix: four 8 x 8 matrices,
// (rows + 0 / + 8) x (n8 tiles j, j + 1), per instruction instead of one 4-byte store per pair (the values of
// sts_split: hi = bf16(x), lo = split_lo); kLo = false: hi only (lo unused).
template <int R, int NJ, int kSign, bool kLo = true>
__device__ __forceinline__ void split_store_acc(bf16* hi, bf16* lo, const float (&acc)[NJ][4], int c0, int tid) {
  static_assert(NJ % 2 == 0 && (kSign == 1 || kSign == -1), "pairs of n8 tiles");
  const int lane = tid & 31, row = 16 * ((tid >> 5) & 3) + 8 * ((lane >> 3) & 1) + (lane & 7);
#pragma unroll
  for (int j = 0; j < NJ; j += 2) {
    uint32_t h[4], l[4];
#pragma unroll
    for (int m = 0; m < 4; ++m) {  // matrix m: rows + 8 (m & 1), n8 tile j + (m >> 1)
      const float x0 = kSign * acc[j + (m >> 1)][2 * (m & 1)], x1 = kSign * acc[j + (m >> 1)][2 * (m & 1) + 1];
      h[m] = pack_bf16(x0, x1);
      if constexpr (kLo) l[m] = split_lo(x0, x1, h[m]);
    }
    const int o = wgmma::sw128_off<R>(row, c0 + 8 * (j + (lane >> 4)));
    stsm_x4(hi + o, h);
    if constexpr (kLo) stsm_x4(lo + o, l);
  }
}

// Wn = -Tb Kg of one chunk by the calling warpgroup (m64 t x n D k, k = 64 s: Tb [64 t][64 s] K-major and Kg
// [D / 64][64 s][64 k] MN-major, 128B-swizzled tiles at sTb, sKg), stored as bf16 hi + lo [D / 64][64 t][64 k] at
// sWh, sWl (split_store_acc; tid: the thread's index, its warpgroup's warps 4 (tid / 128) ..); kLo = false: the hi
// part only (sWl unused: the walk's form).
template <int D, bool kLo = true>
__device__ __forceinline__ void form_wn(const unsigned char* sTb, const unsigned char* sKg, bf16* sWh, bf16* sWl,
                                        int tid) {
  constexpr int NH = D / 64, KT = kC / 16;        // n64 halves of Wn's columns, k-steps over the 64 chunk rows
  constexpr uint32_t kAtom = uint32_t(kC) * 128;  // bytes of one atom column of a 64-row tile
  const uint64_t dTb = wgmma::desc_sw128(sTb), dKg = wgmma::desc_sw128(sKg);
  float acc[NH][8][4];
#pragma unroll
  for (int nh = 0; nh < NH; ++nh) {
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[nh][j][0] = acc[nh][j][1] = acc[nh][j][2] = acc[nh][j][3] = 0.f;
    wgmma::fence_operands(acc[nh]);
  }
  wgmma::fence();
#pragma unroll
  for (int nh = 0; nh < NH; ++nh)
#pragma unroll
    for (int ks = 0; ks < KT; ++ks)
      wgmma::mma<64, 0, 1>(acc[nh], wgmma::desc_add(dTb, 32u * ks),
                           wgmma::desc_add(dKg, uint32_t(nh) * kAtom + 2048u * ks));
  wgmma::commit();
  wgmma::wait<0>();
#pragma unroll
  for (int nh = 0; nh < NH; ++nh) {
    wgmma::fence_operands(acc[nh]);
    split_store_acc<kC, 8, -1, kLo>(sWh, sWl, acc[nh], 64 * nh, tid);
  }
}

template <int D>
__global__ void __launch_bounds__(kRsThreads, 1) kda_chunk_walk_rs(const Params p) {
  using L = RsSmem<D>;
  constexpr int VT = L::VT;
  constexpr int NJ = D / 8;    // n8 tiles of the state's k columns
  constexpr int KS = D / 16;   // k-steps over k = D
  constexpr int KT = kC / 16;  // k-steps over the 64 chunk rows
  constexpr uint32_t kAtom = uint32_t(kC) * 128;  // bytes of one atom column of a 64-row tile
  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char* const smem = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);

  // launched with blockDim.x == kRsThreads (chunk.cu)
  const WalkUnit u = walk_unit<D, VT>(p, int(blockIdx.x));
  if (u.idle) return;  // the whole CTA: before any barrier
  const int tid = threadIdx.x, lane = tid & 31;
  const int wg = __shfl_sync(0xffffffffu, tid >> 7, 0);  // warp-uniform as ptxas sees it (wgmma.cuh)
  const int gq = lane >> 2, tq = lane & 3;
  const int r0 = 16 * ((tid >> 5) & 3) + gq;  // accumulator rows r0, r0 + 8 of this thread
  const int h = u.h, v0 = u.v0;
  const int64_t cbeg = u.cbeg, cend = u.cend;
  const bool o_staged = u.outs && p.o_rows16;     // O(c) through the O stage (WG 1 stores it)
  const bool v_tile = !u.ident;                   // the V term (value columns)
  const bool v_scratch = v_tile && !p.v_in_walk;  // V by bulk copy from the scratch, else from v by cp.async

  uint64_t* const bar_full = reinterpret_cast<uint64_t*>(smem + L::BAR);  // [2] the stage's bulk copies
  uint64_t* const bar_wn = bar_full + 2;     // [2] Wn formed, V landed (WG 1's 128 arrivals)
  uint64_t* const bar_empty = bar_full + 4;  // [2] the stage read (WG 0's 128 arrivals)
  uint64_t* const bar_oready = bar_full + 6;  // O(c) staged (WG 0's 128 arrivals; Params::o_rows16)
  uint64_t* const bar_ofree = bar_full + 7;   // O(c) stored from the stage (WG 1's 128 arrivals)
  bf16* const sO = reinterpret_cast<bf16*>(smem + L::OST);
  if (tid == 0) {
    for (int i = 0; i < 2; ++i) {
      mbar_init(bar_full + i, 1);
      mbar_init(bar_wn + i, 128);
      mbar_init(bar_empty + i, 128);
    }
    mbar_init(bar_oready, 128);
    mbar_init(bar_ofree, 128);
    mbar_init_fence();
  }
  __syncthreads();  // the inits before any copy or wait
  // chunk c's stage, and the parity of its use of that stage (stage b serves the chunks with (c - cbeg) & 1 == b)
  const auto stage = [&](int64_t c) { return smem + size_t((c - cbeg) & 1) * L::kStage; };
  const auto slot = [&](int64_t c) { return int((c - cbeg) & 1); };
  const auto parity = [&](int64_t c) { return uint32_t((c - cbeg) >> 1) & 1u; };

  if (wg == 1) {  // loads and Wn
    const int ptid = tid - 128;
    const auto load = [&](int64_t c) {  // chunk c's operands -> its stage; one cp.async group per call
      unsigned char* const sb = stage(c);
      const int64_t cid = c * p.H + h;
      if (ptid == 0) {
        uint64_t* const bar = bar_full + slot(c);
        mbar_expect_tx(bar, L::load_bytes(u.outs, v_scratch));
        if (u.outs) {
          bulk_g2s(sb + L::QG, p.scr.qg + cid * (kC * D), uint32_t(L::kTileD), bar);
          bulk_g2s(sb + L::AQK, p.scr.aqk + cid * (kC * kC), uint32_t(L::kTile), bar);
        }
        bulk_g2s(sb + L::KDT, p.scr.kdt + cid * (D * kC), uint32_t(L::kTileD), bar);
        bulk_g2s(sb + L::KG, p.scr.kg + cid * (kC * D), uint32_t(L::kTileD), bar);
        bulk_g2s(sb + L::TB, p.scr.tb + cid * (kC * kC), uint32_t(L::kTile), bar);
        bulk_g2s(sb + L::DEC, p.scr.decay + cid * D, uint32_t(D) * 4, bar);
        if (v_scratch)
          bulk_g2s(sb + L::V, p.scr.vb + cid * (kC * D) + scr_tile_off<kC>(0, v0), uint32_t(L::kTile), bar);
      }
      if (v_tile && p.v_in_walk) {  // the V tile from v: 16-byte pieces (row t, columns 8 q ..), zeros past the
                                    // sequence end
        const int64_t tok0 = p.tab[3 * c], bb = p.tab[3 * c + 1];
        const int rows = int(p.tab[3 * c + 2]);
        const bf16* const v = static_cast<const bf16*>(p.v) + bb * p.s_v[0] + h * p.s_v[2] + v0;
        bf16* const sV = reinterpret_cast<bf16*>(sb + L::V);
#pragma unroll
        for (int it = 0; it < kC * 8 / 128; ++it) {
          const int e = ptid + 128 * it, t = e >> 3, q = e & 7;
          const bool valid = t < rows;
          cp_async16_zfill(sV + wgmma::sw128_off<kC>(t, 8 * q), v + (valid ? (tok0 + t) * p.s_v[1] : 0) + 8 * q, valid);
        }
      }
      cp_async_commit();
    };
    // O(c) from the stage to o (Params::o_rows16), once WG 0 has staged it: 16-byte pieces (row t, columns 8 q ..),
    // rows of the sequence only
    const auto store_o = [&](int64_t c) {
      if (!o_staged) return;
      mbar_wait(bar_oready, uint32_t(c - cbeg) & 1u);
      const int64_t tok0 = p.tab[3 * c], bb = p.tab[3 * c + 1];
      const int rows = int(p.tab[3 * c + 2]);
      bf16* const o = static_cast<bf16*>(p.o) + bb * p.s_o[0] + tok0 * p.s_o[1] + h * p.s_o[2] + v0;
#pragma unroll
      for (int it = 0; it < kC * 8 / 128; ++it) {
        const int e = ptid + 128 * it, t = e >> 3, q = e & 7;
        if (t < rows)
          stg128(o + t * p.s_o[1] + 8 * q, *reinterpret_cast<const uint4*>(sO + wgmma::sw128_off<kC>(t, 8 * q)));
      }
      mbar_arrive(bar_ofree);
    };
    if (cbeg < cend) load(cbeg);
#pragma unroll 1
    for (int64_t c = cbeg; c < cend; ++c) {
      unsigned char* const sb = stage(c);
      mbar_wait(bar_full + slot(c), parity(c));  // Kg(c), Tb(c) (and the rest of the stage)
      form_wn<D, false>(sb + L::TB, sb + L::KG, reinterpret_cast<bf16*>(sb + L::WH), nullptr, tid);  // Wn hi only
      cp_async_wait<0>();  // this thread's V(c) pieces
      fence_proxy_async();
      mbar_arrive(bar_wn + slot(c));
      if (c + 1 < cend) {  // chunk c + 1 into the stage of chunk c - 1, once WG 0 is done with it
        if (c > cbeg) mbar_wait(bar_empty + slot(c + 1), parity(c - 1));
        load(c + 1);
      }
      if (c > cbeg) store_o(c - 1);
    }
    if (cbeg < cend) store_o(cend - 1);
    return;
  }

  // WG 0: the state S^T[v][k] (v = r0 + 8 (e / 2), k = 8 j + 2 tq + e % 2), fp32, in the state update's accumulators,
  // from where the unit's state starts (WalkUnit::src)
  const StartState start = StartState::of<D>(p, u);
  float st[NJ][4];
#pragma unroll
  for (int j = 0; j < NJ; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) st[j][e] = start.at(v0 + r0 + 8 * (e >> 1), 8 * j + 2 * tq + (e & 1));
  uint32_t sh[KS][4], sl[KS][4];  // S^T as bf16 hi + lo A fragments, k-step ks = columns 16 ks ..
  const auto split_state = [&]() {
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) a_frag_split(st[2 * ks], st[2 * ks + 1], sh[ks], sl[ks]);
  };
  split_state();
  const auto kstep = [](int ks) { return uint32_t(ks >> 2) * kAtom + uint32_t(ks & 3) * 32; };  // K-major, k = 16 ks

  // The chain over the unit's chunks; kOuts: O is computed and written (the Qg, A_qk products), kVterm: the V term of U
  // (value columns; identity columns have U0 = 0)
  const auto chain = [&]<bool kOuts, bool kVterm>() {
#pragma unroll 1
    for (int64_t c = cbeg; c < cend; ++c) {
      unsigned char* const sb = stage(c);
      mbar_wait(bar_full + slot(c), parity(c));
      mbar_wait(bar_wn + slot(c), parity(c));
      const uint64_t dV = wgmma::desc_sw128(sb + L::V), dTb = wgmma::desc_sw128(sb + L::TB);
      const uint64_t dWh = wgmma::desc_sw128(sb + L::WH);
      const uint64_t dQg = wgmma::desc_sw128(sb + L::QG), dAqk = wgmma::desc_sw128(sb + L::AQK);
      const uint64_t dKdt = wgmma::desc_sw128(sb + L::KDT);
      {  // the state's decay, before the chunk's first wgmma (see the header)
        const float* const dec = reinterpret_cast<const float*>(sb + L::DEC);
#pragma unroll
        for (int j = 0; j < NJ; ++j) {
          const float2 dk = *reinterpret_cast<const float2*>(dec + 8 * j + 2 * tq);
          st[j][0] *= dk.x, st[j][1] *= dk.y, st[j][2] *= dk.x, st[j][3] *= dk.y;
        }
      }
      float acc_u[VT / 8][4], acc_o[VT / 8][4];  // U^T [v][t], O^T [v][t]
#pragma unroll
      for (int j = 0; j < VT / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_u[j][e] = acc_o[j][e] = 0.f;
      wgmma::fence_operands(acc_u);
      if constexpr (kOuts) wgmma::fence_operands(acc_o);
      wgmma::fence();
      // G1, one group, the products of U and of O alternating: two independent accumulator chains, so that
      // each wgmma need not wait for the previous one's accumulation (a single chain of N = 64 wgmma runs at ~3x the
      // tensor pipe's issue interval: docs/gpu/2026-11-30-h200-run33.txt).
      //   U^T = S^T Wn^T + V^T Tb^T;  O^T = S^T Qg^T
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        const uint32_t o = kstep(ks);
        wgmma::mma_rs<VT>(acc_u, sh[ks], wgmma::desc_add(dWh, o));
        if constexpr (kOuts) wgmma::mma_rs<VT>(acc_o, sh[ks], wgmma::desc_add(dQg, o));
        wgmma::mma_rs<VT>(acc_u, sl[ks], wgmma::desc_add(dWh, o));
      }
      if constexpr (kVterm) {
#pragma unroll
        for (int ks = 0; ks < KT; ++ks)
          wgmma::mma<VT, 1, 0>(acc_u, wgmma::desc_add(dV, 2048u * ks), wgmma::desc_add(dTb, 32u * ks));
      }
      wgmma::commit();
      wgmma::wait<0>();
      wgmma::fence_operands(acc_u);
      if constexpr (kOuts) wgmma::fence_operands(acc_o);
      uint32_t uh[KT][4], ul[KT][4];  // U^T as bf16 hi + lo A fragments, k-step ks = chunk rows 16 ks ..
#pragma unroll
      for (int ks = 0; ks < KT; ++ks) a_frag_split(acc_u[2 * ks], acc_u[2 * ks + 1], uh[ks], ul[ks]);
      wgmma::fence_operands(st);
      wgmma::fence();  // the fragments and the decayed state were written by ordinary instructions
      // G2, alternating: O^T += U^T A_qk^T; S^T += U^T KdT^T (the state update)
#pragma unroll
      for (int ks = 0; ks < KT; ++ks) {
        if constexpr (kOuts) wgmma::mma_rs<VT>(acc_o, uh[ks], wgmma::desc_add(dAqk, 32u * ks));
        wgmma::mma_rs<D>(st, uh[ks], wgmma::desc_add(dKdt, 32u * ks));
        if constexpr (kOuts) wgmma::mma_rs<VT>(acc_o, ul[ks], wgmma::desc_add(dAqk, 32u * ks));
        wgmma::mma_rs<D>(st, ul[ks], wgmma::desc_add(dKdt, 32u * ks));
      }
      wgmma::commit();
      wgmma::wait<0>();
      wgmma::fence_operands(st);
      if constexpr (kOuts) wgmma::fence_operands(acc_o);
      wgmma::fence_operands(sh);  // read by G1 until its wait: kept unchanged until here
      wgmma::fence_operands(sl);
      wgmma::fence_operands(uh);
      wgmma::fence_operands(ul);
      mbar_arrive(bar_empty + slot(c));  // every read of the stage is done: WG 1 may load chunk c + 2 into it
      if constexpr (kOuts) {
        if (p.o_rows16) {  // O(c) -> the O stage, transposed by stmatrix (WG 1 stores it): four 8 x 8 matrices, (v
                           // rows + 0 / + 8) x (t columns of n8 tiles j, j + 1), per instruction, stored as rows t
          if (c > cbeg) mbar_wait(bar_ofree, uint32_t(c - 1 - cbeg) & 1u);  // O(c - 1) has left the stage
          const int mat = lane >> 3, v = 16 * ((tid >> 5) & 3) + 8 * (mat & 1);
#pragma unroll
          for (int j = 0; j < VT / 8; j += 2) {
            uint32_t r[4];
#pragma unroll
            for (int m = 0; m < 4; ++m)
              r[m] = pack_bf16(acc_o[j + (m >> 1)][2 * (m & 1)], acc_o[j + (m >> 1)][2 * (m & 1) + 1]);
            stsm_x4_trans(sO + wgmma::sw128_off<kC>(8 * (j + (mat >> 1)) + (lane & 7), v), r);
          }
          mbar_arrive(bar_oready);
        } else {  // O(c) -> o: acc_o[j][e] = O[t = 8 j + 2 tq + e % 2][v = r0 + 8 (e / 2)], rows of the sequence only
          const int64_t tok0 = p.tab[3 * c], bb = p.tab[3 * c + 1];
          const int rows = int(p.tab[3 * c + 2]);
          const int64_t ob = bb * p.s_o[0] + tok0 * p.s_o[1] + h * p.s_o[2] + v0;
#pragma unroll
          for (int j = 0; j < VT / 8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int t = 8 * j + 2 * tq + (e & 1);
              if (t < rows) store_1(p.o, p.dt_o, ob + t * p.s_o[1] + r0 + 8 * (e >> 1), acc_o[j][e]);
            }
        }
      }
      if (c + 1 < cend) split_state();
    }
  };
  if (u.outs) chain.template operator()<true, true>();
  else if (v_tile) chain.template operator()<false, true>();
  else chain.template operator()<false, false>();

  // the state where the unit ends (WalkUnit::dst)
  if (u.dst == kDstUser && p.s1) {
    float* const s1 = p.s1 + user_state_base<D>(p, u.n, h);
#pragma unroll
    for (int j = 0; j < NJ; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        s1[user_state_offset<D>(p, v0 + r0 + 8 * (e >> 1), 8 * j + 2 * tq + (e & 1))] = st[j][e];
  } else if (u.dst == kDstScratch) {
#pragma unroll
    for (int j = 0; j < NJ; ++j)
#pragma unroll
      for (int rr = 0; rr < 2; ++rr)
        *reinterpret_cast<float2*>(u.dst_p + size_t(v0 + r0 + 8 * rr) * D + 8 * j + 2 * tq) =
            make_float2(st[j][2 * rr], st[j][2 * rr + 1]);
  }
}

}  // namespace kimi::cuda::kda_chunk
