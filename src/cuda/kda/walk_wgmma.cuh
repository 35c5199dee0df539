// src/cuda/kda/walk_wgmma.cuh: kernel 2 of the chunkwise KDA prefill (chunk.cuh has the two-pass design, the math
// and the scratch) on Hopper's warpgroup MMA, for V tiles of 64 on plain walks (no segments: those keep chunk.cuh's
// mma.sync walk at V tiles of 32, as do grids that fit one wave at 32). Same operands and precision as the mma.sync
// walk (bf16 hi + lo splits of S, U and Wn, fp32 accumulation); only the fp32 summation order differs
// (KdaCudaShapes.WalkKernelsAgree: 1e-6 relative between the two).
//
// kda_chunk_walk_wg<D> (grid N x H x D / 64, 384 threads = three warpgroups, one CTA per (sequence, head, V tile)).
// Its scratch form (chunk.cuh, Params::wn_in_walk) holds Kg and Tb instead of Wn hi + lo and U0: the walk forms
// Wn = -Tb Kg and U0 = Tb V itself, which takes 25 of the 107 KB per chunk-head off the scratch and the prep's last
// phase (P4) off the prep. V comes from v itself (Params::v_in_walk: bf16 with 16-byte aligned rows, the prep
// then does not load it), else from the scratch (vb). Per chunk c (t, s = chunk rows, v = the tile's 64 value
// columns, k = key channels):
//   WG 2     Wn(c) = -Tb(c) Kg(c)   (m64 t x n D k, k = 64 s) -> Wn hi + lo (one buffer), one chunk ahead of WG 0
//   phase 1  WG 0: U(c) = Tb V + Wh S_h + Wh S_l + Wl S_h     (m64 t x n64 v; k = 64, D) -> U hi + lo, buffer (c -
//                  cbeg) & 1
//            WG 1: O(c) = Qg S_h + Qg S_l                     (m64 t x n64 v, k = D), registers until chunk c + 1
//                  O(c - 1) += A_qk(c - 1) (U_h + U_l)(c - 1)  (k = 64)
//   phase 2  WG w < 2: S^T[v][k in half w] = S^T diag(exp(GC)) + U^T KdT^T   (m64 v x n D / 2 k, k = 64 t), then
//                  the bf16 hi + lo split of its state half for the next chunk's phase 1;
//            WG 1, while its update's wgmma run: O(c - 1) -> global o (stored before them, it delayed WG 1's half
//                  of the update by its table loads and stores; H200 same call: 1 x 16384 H64 2.003 -> 1.986 ms).
// The A_qk U half of O is deferred by one chunk, so that WG 0 and WG 1 issue 24-28 wgmma k-steps in phase 1 and 8 in
// phase 2 (computed in phase 2 beside the state update, it left WG 0 waiting at the end of every chunk: 15% of the
// stall samples, ncu, run 16); the last chunk's is finished after the loop.
// Barriers of WG 0 and 1 (named barrier 1, 256 threads): B1 once the chunk's operands have landed, B2 after phase 1
// (U visible). WG 2 meets WG 0 on two mbarriers: bar_formed (Wn(c) and V(c) in place: WG 2's 128 arrivals) and
// bar_read (WG 0 has read Wn(c), Tb(c), V(c): WG 0's 128 arrivals); so WG 2 forms Wn(c + 1) under WG 0's U split,
// B2 and phase 2 of chunk c.
// Loads (bulk copies, an mbarrier each): chunk c + 1's KdT and decay (double-buffered) after B1 of chunk c, under
// the phase-1 wgmma (thread 0); Qg(c + 1) and A_qk(c) as soon as WG 1 has read Qg(c) and A_qk(c - 1) in phase 1
// (thread 128); Kg, Tb (thread 256) and V (WG 2's cp.async, or thread 256 from the scratch) of chunk c + 1
// (double-buffered) once WG 0 has read chunk c - 1's.
// The fp32 state S^T [64][D] lives in the accumulators of the state update: WG w holds columns k in [w D / 2,
// (w + 1) D / 2) (wgmma.cuh has the accumulator layout).
// Why wgmma: the mma.sync walk is bound by its fragment loads from shared memory (16 warps of 16 x 16 tiles read
// each operand four times: ~672 KB per chunk, docs/BENCHMARKS.md); a warpgroup reads each operand tile once per
// 64-row product, ~240 KB per chunk. Measured (H200, 1 x 16384 H64, ncu; docs/gpu runs 15-22): walk 1.17 ms
// (mma.sync) -> 0.96 (first wgmma form, O in phase 2) -> 0.84-0.87 (O deferred, bulk loads) -> 0.81-0.82 (two
// warpgroups, Wn and U0 from the prep) -> 0.87 (this form, run 22; the prep 1.44 -> 1.15 ms in the same call).
// What bounds it (ncu, run 20, two-warpgroup form): the tensor pipe is active 33% of the cycles; the chain per
// chunk (U -> split -> B2 -> state update -> split -> B1) is latency-bound, ~5.5 K cycles a chunk against ~2 K of
// tensor work. This form adds Tb V (4 k-steps) to that chain and WG 2's 8 k-steps to the tensor pipe.
//
// Shared memory (D = 128). Every bf16 operand tile is in wgmma's 128B-swizzled atom-major layout (wgmma.cuh), which
// is also the scratch layout, so that each tile arrives by one bulk copy:
//   S^T hi, lo [D / 64][64 v][64 k]; two input buffers {KdT [1][D k][64 t], decay [D]}; Wn hi, lo [D / 64][64 t]
//   [64 k] (one buffer); two Kg / Tb / V buffers {Kg [D / 64][64 s][64 k], Tb [1][64 t][64 s], V [1][64 s][64 v]};
//   two U buffers {U hi, lo [1][64 t][64 v]} (row-major U: the MN-major B of A_qk U and the MN-major A of U^T
//   KdT^T); Qg [D / 64][64][64], A_qk [1][64][64]; seven mbarriers. 1 KB of slack aligns the base to the 1024 bytes
//   the swizzle atoms need. Total: WgSmem<D>::TOTAL (224312 bytes at D = 128). Registers (ptxas, CUDA 13.0; 168 is
//   the cap at 384 threads): 160 at D = 128, 157 at 64, no spills. The hi + lo splits of U, S and Wn go to shared
//   memory by stmatrix (split_store_acc) since session 9: 167 -> 160 registers at D = 128, ~70 fewer instructions
//   per chunk, 1 x 16384 H64 1.0-1.3% faster in two calls (docs/gpu runs 30, 32).
#pragma once

#include "cuda/kda/chunk.cuh"
#include "cuda/wgmma.cuh"

namespace kimi::cuda::kda_chunk {

constexpr int kWgThreads = 384;  // three warpgroups: WG 0 U, WG 1 O, WG 2 forms Wn

template <int D>
struct WgSmem {
  static constexpr int VT = 64;
  static constexpr size_t align(size_t x) { return (x + 1023) / 1024 * 1024; }
  static constexpr size_t kTileD = size_t(kC) * D * 2;  // bf16 [64][D] or [D][64]
  static constexpr size_t kTile = size_t(kC) * VT * 2;  // bf16 [64][64]
  static constexpr size_t SH = 0, SL = SH + kTileD;     // S^T hi, lo
  // input buffer (two): KdT, decay
  static constexpr size_t BKDT = 0, BDEC = BKDT + kTileD;
  static constexpr size_t kBuf = align(BDEC + size_t(D) * 4);
  static constexpr uint32_t kInBytes = uint32_t(kTileD + size_t(D) * 4);
  static constexpr size_t BUF0 = SL + kTileD;
  static constexpr size_t WH = BUF0 + 2 * kBuf, WL = WH + kTileD;  // Wn hi, lo (one buffer)
  // Kg / Tb / V buffer (two): Kg [D / 64][64 s][64 k], Tb [1][64 t][64 s], the V tile [1][64 s][64 v]
  static constexpr size_t BKG = 0, BTB = BKG + kTileD, BV = BTB + kTile, kKBuf = BV + kTile;
  static constexpr size_t KBUF0 = WL + kTileD;
  static constexpr size_t kUBuf = 2 * kTile;                  // U hi, lo [64][64]
  static constexpr size_t UH = KBUF0 + 2 * kKBuf, UL = UH + kTile;  // buffer 0; buffer 1: + kUBuf
  static constexpr size_t QG = UH + 2 * kUBuf;
  static constexpr size_t AQK = QG + kTileD;
  // mbarriers: inputs of buffer 0, 1; Qg + A_qk; Kg / Tb / V of buffer 0, 1; Wn formed; Wn, Tb and V read
  static constexpr size_t BAR = AQK + kTile;
  static constexpr size_t USED = BAR + 7 * 8;
  static constexpr size_t TOTAL = USED + 1024;  // base alignment slack
  static_assert(D == 64 || D == 128, "head sizes");
  static_assert(SL % 1024 == 0 && BUF0 % 1024 == 0 && BV % 1024 == 0 && BDEC % 1024 == 0 && kBuf % 1024 == 0 &&
                    WH % 1024 == 0 && WL % 1024 == 0 && KBUF0 % 1024 == 0 && BTB % 1024 == 0 && kKBuf % 1024 == 0 &&
                    UH % 1024 == 0 && UL % 1024 == 0 && QG % 1024 == 0 && AQK % 1024 == 0 && BAR % 8 == 0,
                "swizzle atoms 1024-byte aligned");
  static_assert(TOTAL <= 227 * 1024, "fits the sm_90 shared memory of one CTA");
};
static_assert(WgSmem<128>::TOTAL == 224312, "documented size");

// Chunk-head cid's inputs of the state update (KdT, decay) -> one input buffer.
template <int D>
__device__ __forceinline__ void walk_wg_load_inputs(const Params& p, unsigned char* buf, int64_t cid, uint64_t* bar,
                                                    int tid) {
  using L = WgSmem<D>;
  if (tid != 0) return;
  mbar_expect_tx(bar, L::kInBytes);
  bulk_g2s(buf + L::BKDT, p.scr.kdt + cid * (D * kC), uint32_t(L::kTileD), bar);
  bulk_g2s(buf + L::BDEC, p.scr.decay + cid * D, uint32_t(D) * 4, bar);
}

// Chunk c's Kg and Tb (head h) -> one Kg / Tb / V buffer by bulk copies (thread 256, on bar), and its V tile (columns
// v0 ..): from the scratch by the same thread, or with Params::v_in_walk from v itself by WG 2's 128 threads
// (16-byte cp.async into the swizzled tile, zeros beyond the sequence end). Called by all of WG 2: each thread
// commits one cp.async group per call, empty or not, so that WG 2 counts its groups by chunk.
template <int D>
__device__ __forceinline__ void walk_wg_load_kgv(const Params& p, unsigned char* kbuf, int64_t c, int h, int v0,
                                                 uint64_t* bar, int tid) {
  using L = WgSmem<D>;
  const int64_t cid = c * p.H + h;
  if (tid == 256) {
    mbar_expect_tx(bar, uint32_t(L::kTileD + L::kTile + (p.v_in_walk ? 0 : L::kTile)));
    bulk_g2s(kbuf + L::BKG, p.scr.kg + cid * (kC * D), uint32_t(L::kTileD), bar);
    bulk_g2s(kbuf + L::BTB, p.scr.tb + cid * (kC * kC), uint32_t(L::kTile), bar);
    if (!p.v_in_walk)
      bulk_g2s(kbuf + L::BV, p.scr.vb + cid * (kC * D) + scr_tile_off<kC>(0, v0), uint32_t(L::kTile), bar);
  }
  if (p.v_in_walk) {
    const int64_t tok0 = p.tab[3 * c], bb = p.tab[3 * c + 1];
    const int rows = int(p.tab[3 * c + 2]);
    const bf16* const v = static_cast<const bf16*>(p.v) + bb * p.s_v[0] + h * p.s_v[2] + v0;
    bf16* const sV = reinterpret_cast<bf16*>(kbuf + L::BV);
#pragma unroll
    for (int it = 0; it < kC * 8 / 128; ++it) {  // 16-byte pieces (row t, columns 8 q ..)
      const int e = (tid - 256) + 128 * it, t = e >> 3, q = e & 7;
      const bool valid = t < rows;
      cp_async16_zfill(sV + wgmma::sw128_off<kC>(t, 8 * q), v + (valid ? (tok0 + t) * p.s_v[1] : 0) + 8 * q, valid);
    }
  }
  cp_async_commit();
}

// Qg of chunk-head cid_q (cid_q < 0: none) and A_qk of chunk-head cid_a (< 0: none) -> their single buffers, by one
// thread; `expect` (0: none) posts the phase's transaction bytes first: the pieces of one phase of the mbarrier may
// come from two calls, the first posting the whole phase.
template <int D>
__device__ __forceinline__ void walk_wg_load_out(const Params& p, unsigned char* smem, int64_t cid_q, int64_t cid_a,
                                                 uint32_t expect, uint64_t* bar) {
  using L = WgSmem<D>;
  if (expect) mbar_expect_tx(bar, expect);
  if (cid_q >= 0) bulk_g2s(smem + L::QG, p.scr.qg + cid_q * (kC * D), uint32_t(L::kTileD), bar);
  if (cid_a >= 0) bulk_g2s(smem + L::AQK, p.scr.aqk + cid_a * (kC * kC), uint32_t(kC) * kC * 2, bar);
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
// part only (sWl unused: walk_rs.cuh).
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

// Barrier of the 128 threads of warpgroup w (named barrier 2 + w), and of warpgroups 0 and 1 (named barrier 1;
// 0 is __syncthreads, which WG 2's early exit rules out after the set-up).
__device__ __forceinline__ void wg_sync(int w) { asm volatile("bar.sync %0, 128;" ::"r"(2 + w) : "memory"); }
__device__ __forceinline__ void pair_sync() { asm volatile("bar.sync 1, 256;" ::: "memory"); }

// WG 2: Wn(c) = -Tb(c) Kg(c) for every chunk c of the walk, as bf16 hi + lo into the one Wn buffer, one chunk
// ahead of WG 0: Wn(c) is written once WG 0 has read Wn(c - 1), Tb(c - 1) and V(c - 1) (bar_read, WG 0's 128
// arrivals), and announced on bar_formed (WG 2's 128 arrivals, each after its V(c) copies have landed and its
// fence for the async proxy). The Kg / Tb / V buffer of chunk c - 1 is then free: WG 2 loads chunk c + 1 into it.
template <int D>
__device__ __forceinline__ void walk_wg_form_wn(const Params& p, unsigned char* smem, int64_t cbeg, int64_t cend,
                                                int h, int v0, uint64_t* bar_kg, uint64_t* bar_formed,
                                                uint64_t* bar_read, int tid) {
  using L = WgSmem<D>;
  bf16* const sWh = reinterpret_cast<bf16*>(smem + L::WH);
  bf16* const sWl = reinterpret_cast<bf16*>(smem + L::WL);
  const auto kbuf = [&](int64_t c) { return smem + L::KBUF0 + size_t((c - cbeg) & 1) * L::kKBuf; };
#pragma unroll 1
  for (int64_t c = cbeg; c < cend; ++c) {
    if (c > cbeg) {
      mbar_wait(bar_read, uint32_t(c - 1 - cbeg) & 1u);  // WG 0 has read Wn(c - 1), Tb(c - 1), V(c - 1)
      if (c + 1 < cend)
        walk_wg_load_kgv<D>(p, kbuf(c + 1), c + 1, h, v0, bar_kg + ((c + 1 - cbeg) & 1), tid);
      else
        cp_async_commit();  // one group per chunk
    }
    mbar_wait(bar_kg + ((c - cbeg) & 1), uint32_t((c - cbeg) >> 1) & 1u);
    form_wn<D>(kbuf(c) + L::BTB, kbuf(c) + L::BKG, sWh, sWl, tid);
    cp_async_wait<1>();  // this thread's V(c) pieces (the newest group is chunk c + 1's)
    fence_proxy_async();
    mbar_arrive(bar_formed);
  }
}

template <int D>
__global__ void __launch_bounds__(kWgThreads, 1) kda_chunk_walk_wg(const Params p) {
  using L = WgSmem<D>;
  constexpr int VT = L::VT, NV = D / VT;
  constexpr int NS = D / 2;                       // state columns per warpgroup
  constexpr int KS = D / 16;                      // k-steps of the products over k = D
  constexpr int KT = kC / 16;                     // k-steps of the products over the 64 chunk rows
  constexpr uint32_t kAtom = uint32_t(kC) * 128;  // bytes of one atom column of a 64-row tile
  // 128-byte alignment as declared by the TU's other kernels; the base is aligned to 1024 below
  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char* const smem = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  bf16* const sSh = reinterpret_cast<bf16*>(smem + L::SH);
  bf16* const sSl = reinterpret_cast<bf16*>(smem + L::SL);

  KDA_CHUNK_ASSERT(blockDim.x == kWgThreads && p.walk_mode == kWalkPlain && p.wn_in_walk);
  const int tid = threadIdx.x, lane = tid & 31;
  // warpgroup index, warp-uniform as ptxas sees it (a broadcast): wgmma in branches on it is not serialized
  const int wg = __shfl_sync(0xffffffffu, tid >> 7, 0);
  const int gq = lane >> 2, tq = lane & 3;
  const int r0 = 16 * ((tid >> 5) & 3) + gq;  // accumulator rows r0, r0 + 8 of this thread
  const int bid = int(blockIdx.x);
  const int h = (bid / NV) % p.H, v0 = (bid % NV) * VT;
  const int64_t n = bid / (NV * p.H);
  const int64_t cbeg = p.seq0[n], cend = p.seq0[n + 1];

  uint64_t* const bar_in = reinterpret_cast<uint64_t*>(smem + L::BAR);  // [2]: inputs of buffer 0, 1
  uint64_t* const bar_out = bar_in + 2;                                 // Qg + A_qk
  uint64_t* const bar_kg = bar_in + 3;      // [2]: Kg, Tb (and V from the scratch) of buffer 0, 1
  uint64_t* const bar_formed = bar_in + 5;  // Wn(c) formed, V(c) landed (WG 2's 128 arrivals)
  uint64_t* const bar_read = bar_in + 6;    // Wn(c), Tb(c) and V(c) read (WG 0's 128 arrivals)
  if (tid == 0) {
    mbar_init(bar_in, 1);
    mbar_init(bar_in + 1, 1);
    mbar_init(bar_out, 1);
    mbar_init(bar_kg, 1);
    mbar_init(bar_kg + 1, 1);
    mbar_init(bar_formed, 128);
    mbar_init(bar_read, 128);
    mbar_init_fence();
  }
  __syncthreads();  // the inits before any copy or wait
  if (cbeg < cend && tid == 0) {
    walk_wg_load_inputs<D>(p, smem + L::BUF0, cbeg * p.H + h, bar_in, tid);
    walk_wg_load_out<D>(p, smem, cbeg * p.H + h, -1, uint32_t(L::kTileD), bar_out);
  }
  if (wg == 2) {  // the Wn former
    for (int64_t c = cbeg; c < cbeg + 2; ++c)  // chunks cbeg, cbeg + 1: one cp.async group each, empty or not
      if (c < cend)
        walk_wg_load_kgv<D>(p, smem + L::KBUF0 + size_t(c - cbeg) * L::kKBuf, c, h, v0, bar_kg + (c - cbeg), tid);
      else
        cp_async_commit();
    walk_wg_form_wn<D>(p, smem, cbeg, cend, h, v0, bar_kg, bar_formed, bar_read, tid);
    return;
  }
  // Loads in flight are awaited at the top of each chunk. Use u of an mbarrier completes its phase u: bar_in[b]
  // and bar_kg[b] serve the chunks c with (c - cbeg) & 1 == b (use (c - cbeg) >> 1), bar_out one load per chunk
  // (use c - cbeg: Qg(c) and A_qk(c - 1); use cend - cbeg: A_qk(cend - 1)), bar_formed / bar_read one use per chunk.
  const auto wait_out = [&](int64_t c) { mbar_wait(bar_out, uint32_t(c - cbeg) & 1u); };  // Qg(c), A_qk(c - 1)
  const auto wait_loads = [&](int64_t c) {  // chunk c's inputs, Qg(c) and A_qk(c - 1)
    mbar_wait(bar_in + ((c - cbeg) & 1), uint32_t((c - cbeg) >> 1) & 1u);
    wait_out(c);
  };
  // State half of this warpgroup: st[j][e] = S^T[v][k], v = r0 + 8 (e / 2), k = k0 + 8 j + 2 tq + e % 2.
  const int k0 = wg * NS;
  float st[NS / 8][4];
#pragma unroll
  for (int j = 0; j < NS / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int64_t i = user_state_index<D>(p, n, h, v0 + r0 + 8 * (e >> 1), k0 + 8 * j + 2 * tq + (e & 1));
      st[j][e] = p.s0 ? p.s0[i] : 0.f;
    }
  const auto store_split = [&]() {  // S^T hi + lo of this warpgroup's half, for the next products
    split_store_acc<VT, NS / 8, 1>(sSh, sSl, st, k0, tid);
    fence_proxy_async();
  };
  store_split();  // ordered before the first read by the barrier at the top of the first iteration

  const uint64_t dSh = wgmma::desc_sw128(sSh), dSl = wgmma::desc_sw128(sSl);
  const uint64_t dQg = wgmma::desc_sw128(smem + L::QG), dAqk = wgmma::desc_sw128(smem + L::AQK);
  const auto kstep = [](int ks) {
    return uint32_t(ks >> 2) * kAtom + uint32_t(ks & 3) * 32;
  };                                             // K-major, k = 16 ks
  const auto u_tile = [&](int64_t c, bool lo) {  // U hi / lo of chunk c: U buffer (c - cbeg) & 1
    return reinterpret_cast<bf16*>(smem + (lo ? L::UL : L::UH) + size_t((c - cbeg) & 1) * L::kUBuf);
  };
  const auto u_desc = [&](int64_t c, bool lo) { return wgmma::desc_sw128(u_tile(c, lo)); };

  // WG 1: O(c - 1) += A_qk(c - 1) U(c - 1) (wgmma issued, not waited for), and its store once complete
  float acc_prev[VT / 8][4] = {};  // WG 1: O(c - 1) (Qg S part from the previous iteration)
  float acc_q[VT / 8][4];          // WG 1: Qg(c) S
  const auto o_finish_issue = [&](int64_t c) {
    const uint64_t uh = u_desc(c, false), ul = u_desc(c, true);
#pragma unroll
    for (int ks = 0; ks < KT; ++ks) {
      wgmma::mma<VT, 0, 1>(acc_prev, wgmma::desc_add(dAqk, 32u * ks), wgmma::desc_add(uh, 2048u * ks));
      wgmma::mma<VT, 0, 1>(acc_prev, wgmma::desc_add(dAqk, 32u * ks), wgmma::desc_add(ul, 2048u * ks));
    }
  };
  const auto o_store = [&](int64_t c) {
    const int64_t tok0 = p.tab[3 * c], bb = p.tab[3 * c + 1];
    const int rows = int(p.tab[3 * c + 2]);
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const int t = r0 + 8 * rr;
      if (t < rows) {
        const int64_t ob = bb * p.s_o[0] + (tok0 + t) * p.s_o[1] + h * p.s_o[2] + v0;
#pragma unroll
        for (int j = 0; j < VT / 8; ++j)
          store_2(p.o, p.dt_o, ob + 8 * j + 2 * tq, acc_prev[j][2 * rr], acc_prev[j][2 * rr + 1]);
      }
    }
  };

#pragma unroll 1
  for (int64_t c = cbeg; c < cend; ++c) {
    const int64_t cid = c * p.H + h;
    unsigned char* const buf = smem + L::BUF0 + size_t((c - cbeg) & 1) * L::kBuf;
    wait_loads(c);    // chunk c's inputs, Qg(c) and A_qk(c - 1) have landed
    pair_sync();  // B1: also, every read of chunk c - 1's buffer (phase 2) is done; the S split is visible
    // The other input buffer is free: chunk c + 1's inputs, issued once this warpgroup's wgmma are under way.
    const auto prefetch_next = [&]() {
      if (c + 1 < cend)
        walk_wg_load_inputs<D>(p, smem + L::BUF0 + size_t((c + 1 - cbeg) & 1) * L::kBuf, cid + p.H,
                               bar_in + ((c + 1 - cbeg) & 1), tid);
    };

    // phase 1: U(c) (WG 0); Qg(c) S and the rest of O(c - 1) (WG 1)
    if (wg == 0) {
      float acc[VT / 8][4] = {};  // U0 + Wn S = Tb V + Wn S
      const int b = int((c - cbeg) & 1);
      unsigned char* const kb = smem + L::KBUF0 + size_t(b) * L::kKBuf;
      mbar_wait(bar_kg + b, uint32_t((c - cbeg) >> 1) & 1u);  // Tb(c) (and V(c) from the scratch)
      mbar_wait(bar_formed, uint32_t(c - cbeg) & 1u);         // Wn(c), formed by WG 2 (and V(c) from v)
      const uint64_t dWh = wgmma::desc_sw128(smem + L::WH), dWl = wgmma::desc_sw128(smem + L::WL);
      const uint64_t dTb = wgmma::desc_sw128(kb + L::BTB), dV = wgmma::desc_sw128(kb + L::BV);
      wgmma::fence_operands(acc);
      wgmma::fence();
#pragma unroll
      for (int ks = 0; ks < KT; ++ks)
        wgmma::mma<VT, 0, 1>(acc, wgmma::desc_add(dTb, 32u * ks), wgmma::desc_add(dV, 2048u * ks));
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        const uint32_t o = kstep(ks);
        wgmma::mma<VT, 0, 0>(acc, wgmma::desc_add(dWh, o), wgmma::desc_add(dSh, o));
        wgmma::mma<VT, 0, 0>(acc, wgmma::desc_add(dWh, o), wgmma::desc_add(dSl, o));
        wgmma::mma<VT, 0, 0>(acc, wgmma::desc_add(dWl, o), wgmma::desc_add(dSh, o));
      }
      wgmma::commit();
      prefetch_next();
      wgmma::wait<0>();
      wgmma::fence_operands(acc);
      mbar_arrive(bar_read);  // this thread's wgmma have read Wn(c), Tb(c), V(c): WG 2 may form Wn(c + 1)
      split_store_acc<kC, VT / 8, 1>(u_tile(c, false), u_tile(c, true), acc, 0, tid);
      fence_proxy_async();
    } else {
      // Qg(c) S, then O(c - 1)'s A_qk U, one wgmma group. Once the warpgroup has read Qg(c) and A_qk(c - 1), its
      // first thread loads Qg(c + 1) and A_qk(c), before B2. (Two groups with a wait_group 1 between them, to
      // issue the Qg load earlier, made ptxas serialize every wgmma of the kernel: C7514.)
#pragma unroll
      for (int j = 0; j < VT / 8; ++j) acc_q[j][0] = acc_q[j][1] = acc_q[j][2] = acc_q[j][3] = 0.f;
      wgmma::fence_operands(acc_q);
      wgmma::fence_operands(acc_prev);  // written by ordinary instructions (the copy from acc_q)
      wgmma::fence();
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        const uint32_t o = kstep(ks);
        wgmma::mma<VT, 0, 0>(acc_q, wgmma::desc_add(dQg, o), wgmma::desc_add(dSh, o));
        wgmma::mma<VT, 0, 0>(acc_q, wgmma::desc_add(dQg, o), wgmma::desc_add(dSl, o));
      }
      const bool first = c == cbeg;
      if (!first) o_finish_issue(c - 1);
      wgmma::commit();
      prefetch_next();
      const uint32_t bytes = uint32_t((c + 1 < cend ? L::kTileD : 0) + size_t(kC) * kC * 2);
      wgmma::wait<0>();
      wg_sync(1);  // every warp of the warpgroup has read Qg(c) and A_qk(c - 1)
      if (tid == 128) walk_wg_load_out<D>(p, smem, c + 1 < cend ? cid + p.H : -1, cid, bytes, bar_out);
      wgmma::fence_operands(acc_q);
      wgmma::fence_operands(acc_prev);
    }
    pair_sync();  // B2: U(c) visible to both warpgroups

    // phase 2: the state update of this warpgroup's half (A = U(c), MN-major; B = KdT rows k0 ..)
    const float* const sDecay = reinterpret_cast<const float*>(buf + L::BDEC);
#pragma unroll
    for (int j = 0; j < NS / 8; ++j) {
      const float2 dk = *reinterpret_cast<const float2*>(sDecay + k0 + 8 * j + 2 * tq);
      st[j][0] *= dk.x, st[j][1] *= dk.y, st[j][2] *= dk.x, st[j][3] *= dk.y;
    }
    const uint64_t dKdt = wgmma::desc_sw128(buf + L::BKDT + size_t(k0) * 128);
    const uint64_t uh = u_desc(c, false), ul = u_desc(c, true);
    wgmma::fence_operands(st);
    wgmma::fence();
#pragma unroll
    for (int ks = 0; ks < KT; ++ks) {
      wgmma::mma<NS, 1, 0>(st, wgmma::desc_add(uh, 2048u * ks), wgmma::desc_add(dKdt, 32u * ks));
      wgmma::mma<NS, 1, 0>(st, wgmma::desc_add(ul, 2048u * ks), wgmma::desc_add(dKdt, 32u * ks));
    }
    wgmma::commit();
    if (wg == 1) {  // under the state update: O(c - 1) to global memory, then O(c) starts from Qg(c) S
      if (c > cbeg) o_store(c - 1);
#pragma unroll
      for (int j = 0; j < VT / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_prev[j][e] = acc_q[j][e];
    }
    wgmma::wait<0>();
    wgmma::fence_operands(st);
    store_split();  // S(c + 1): read in phase 1 of chunk c + 1, after its B1 (S(c) was read before B2)
  }
  if (cbeg < cend) {  // the deferred half of the last chunk's O
    wait_out(cend);   // A_qk(cend - 1)
    pair_sync();
    if (wg == 1) {
      wgmma::fence_operands(acc_prev);
      wgmma::fence();
      o_finish_issue(cend - 1);
      wgmma::commit();
      wgmma::wait<0>();
      wgmma::fence_operands(acc_prev);
      o_store(cend - 1);
    }
  }

  if (p.s1) {
#pragma unroll
    for (int j = 0; j < NS / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        p.s1[user_state_index<D>(p, n, h, v0 + r0 + 8 * (e >> 1), k0 + 8 * j + 2 * tq + (e & 1))] = st[j][e];
  }
}

}  // namespace kimi::cuda::kda_chunk
