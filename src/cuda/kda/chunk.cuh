// src/cuda/kda/chunk.cuh: chunkwise KDA forward (prefill) on tensor cores, SPEC 5 / 5.1, in two passes:
// everything that does not depend on the state is computed for all chunks in parallel (prep), and one
// sequential walk per (sequence, head, V tile) does the state-dependent products, the output included.
//
// Chunks: C = 64 rows; chunks never straddle sequences. The launcher builds a host table of all chunks
// (tab[3 c] = first token, tab[3 c + 1] = batch row, tab[3 c + 2] = rows) and of the first chunk of each
// sequence (seq0[n], seq0[N] = number of chunks), uploaded to the device. Rows beyond a sequence end are zero
// (q = k = v = 0, g = 0, beta = 0): they neither decay nor update the state, and their outputs are not written.
//
// Kernel 1, kda_chunk_prep<D, kDiagMma> (prep.cuh: grid chunks x H, 512 threads, one chunk-head per CTA, two
//   CTAs per SM, fully parallel): A_qk (lower incl. diagonal, bf16), Qg = q exp(G), KdT[k][t] = k_t exp(GC -
//   G_t), decay = exp(GC), and through T = (I + A_kk)^-1 (fp32), Tb = T diag(beta): Wn = -Tb Kg (bf16 hi + lo)
//   and U0 = Tb V (fp32), so that the pseudo-values are U = U0 + Wn S (Tb and Kg are bf16, U0 is exact in fp32
//   and Wn keeps ~16 bits). prep.cuh has the phases, the factoring of exp(G_i - G_j) through 16-row block
//   references and the shared-memory budget. For the wgmma walk (Params::wn_in_walk) the prep stops at Tb and
//   stores Kg and Tb instead: that walk forms Wn and U0 itself (the same products, fp32 order aside).
// Kernel 2, kda_chunk_walk<D, VT, NTHR> (grid: N x H x D / VT, one CTA per (sequence, head, V tile); launched
//   at VT = 32 with 256 threads, for the segments and for grids that fit one wave when o is not bf16 with aligned
//   rows; V tiles of 64 run walk_rs.cuh's register-A walk (the default since session 10) or walk_wgmma.cuh's
//   warpgroup-MMA walk instead: the VT = 64, 512-thread form below is history):
//   the fp32 state slice S^T[VT][K] lives in registers, in the accumulator layout of its update (each warp owns
//   a 16 x D / WN7 tile), and its bf16 hi + lo split in shared memory. The inputs of chunk c + 1 (Wn hi + lo, U0
//   slice, KdT, decay) are prefetched with cp.async into a second buffer while chunk c computes; Qg and A_qk (one
//   buffer) are fetched once chunk c - 1 has read them.
//     U = U0 + Wn S          (64 x VT, k = K; Wn hi + lo, S hi + lo: 3 mma) -> U^T hi + lo (shared memory)
//     O = Qg S + A_qk U      (64 x VT; S hi + lo, U hi + lo: 2 + 2 mma) -> global o (rows in the sequence)
//     S^T <- S^T diag(exp(GC)) + U^T KdT^T   (VT x K, k = 64; U hi + lo; the registers accumulate)
//   The hi / lo correction products go to separate accumulators (warp_mma_split): shorter mma chains.
//   The Qg S half of O is computed in the same pass over S^T hi + lo as U (warp_mma_split with A2 = Qg), so each S
//   fragment is loaded once for five products. Why: the walk's per-chunk time is bounded by shared-memory
//   traffic rather than by the tensor cores. Per chunk (D = 128, VT = 64, 16 warps of 16 x 16 tiles) the mma
//   fragments read ~672 KB by ldmatrix: U 256, Qg S 192, A_qk U 96, the state update 128. The cp.async
//   prefetch writes 88 KB and the hi / lo splits of U and S 48 KB. At 128 B per clock that is ~6.3 K of the
//   ~10 K clocks a chunk takes, against ~3 K clocks of mma issue. The shared pass removes 128 KB.
// Segments (sequence parallelism; few heads x long sequences, where the plain walk's N x H x D / 32 CTAs leave
//   most SMs idle). Per chunk the state map is affine, S' = A_c S + B_c with A_c = diag(decay) + KdT Wn (K x K),
//   B_c = KdT U0, the same A_c for every V column. The launcher splits each sequence into P segments of
//   len_seg whole chunks (a segment table on the device: first chunk, end chunk, sequence, index j, count P;
//   built on the device for capture) and runs the walk kernel three times over "walk units" (WalkUnit, walk_unit:
//   one CTA each; the kernel is walk_rs.cuh's at VT = 64 where that is the plain walk, else the VT = 32 one below):
//   phase 1 (kWalkMaps, grid segments x H x 2 D / VT): segment 0 is an ordinary walk from the initial state
//     with outputs, ending in scratch (seg_start of segment 1; in s1 when P = 1); a middle segment j walks
//     its V value columns from S = 0 (C_j, to seg_start of segment j + 1) and, in K / VT more CTAs, identity
//     columns from S = I with U0 = 0 (M_j, to seg_map: row i = M_j e_i); no outputs, so no Qg / A_qk.
//   phase 2 (kda_seg_scan, seqpar.cuh): start_{j+1} = M_j start_j + C_j in fp32, sequentially over j.
//   phase 3 (kWalkFinish, grid segments x H x D / VT): segments j >= 1 walk from their start in scratch (never
//     from s0: s1 may alias it), with outputs; the last one writes s1.
//   Scratch: two [D][D] fp32 blocks per segment-head (rows v, columns k). The work is ~3x the plain walk's
//   (maps of K + V columns, then the V columns again), so it pays only while SMs would idle: the launcher's cost
//   model (src/ops/kda_segment_plan.h) prices both (list scheduling of the CTAs on the SMs) and picks len_seg.
//   Measured (H200, bf16, 1 x 65536 H8): 4.75 ms -> 3.01 ms with 4 or 7 segments (VT = 32, session 4); 2.650 ->
//   1.196 ms with 9 on walk_rs.cuh (session 11); harness errors with segments forced: o 2.8-3.6e-3, final state
//   0.2-2.5e-3 (chunk.cu has the numbers).
// All products: mma.sync.m16n8k16 bf16 x bf16 -> fp32, each operand with the same precision as the former
// single kernel (measured on the H200 vs an fp64 recurrence, bf16 inputs and output, both gate forms, T up to
// 65536: relative RMS error 3.0-3.6e-3 on o, 1.9-2.4e-3 on the final state; the bar is 5e-3; single-bf16
// S/X/U gave 4.7e-3). f32 inputs get ~4e-3 too: NOT an fp32-accurate path.
//
// Scratch (one cudaMallocAsync per call, per chunk-head, D = K = V; x64 rows, so bytes per token-head =
// per chunk-head / 64): Qg bf16 [64][D], A_qk bf16 [64][64], KdT bf16 [D][64], decay f32 [D], then by the walk that
// reads it (Params::wn_in_walk):
//   the mma.sync walk: Wn hi + lo bf16 2 x [64][D], U0 f32 [64][D];
//   the wgmma walk (walk_wgmma.cuh, which forms Wn = -Tb Kg and U0 = Tb V itself): Kg bf16 [64][D], Tb bf16
//   [64][64], and v bf16 [64][D] unless the walk reads its V tiles from v (Params::v_in_walk).
// Element layouts (scr_tile_off, scr_u0_off): the bf16 tiles exactly as the wgmma walk holds them in shared memory
// (128B-swizzled, atom-major: wgmma.cuh), so that one bulk copy moves each; U0 as [D / 64] column blocks of [64 t]
// [64 v], the 16-byte chunks of row t XOR-permuted by t & 7. The mma.sync walk's cp.async loads gather from these
// layouts chunk by chunk (cp_tile_g2s kFrom).
//   D = 128: 107008 B per chunk-head = 1672 B per token-head (1 x 16384 x H64: 1.75 GB) for the mma.sync walk;
//            82432 / 66048 B (1288 / 1032 B per token-head) for the wgmma walk with v from the scratch / from v.
//   D =  64:  57600 B per chunk-head =  900 B per token-head; 49408 / 41216 B.
//
// Shared memory (bytes; D = 128 / 64): prep 113936 / 79888 (2 CTAs / SM); walk (D = 128) VT = 32: 172032 (1 CTA /
// SM; the former VT = 64 form: 214016; walk_wgmma.cuh: 224312). Row pads of 16 bytes (bf16) and 16-32 bytes
// (fp32), or the walk's swizzled tiles (WalkSmem), keep the fragment loads bank-conflict free.
// ptxas (sm_90a, CUDA 13.0 here): registers prep 64 (512 threads, capped for 2 CTAs / SM), walk 222 (VT = 32,
// with the segment modes); no spills.
//
// Measured on the H200 (docs/BENCHMARKS.md, docs/gpu/2026-11-29-h200-prep1.txt; ncu gpu__time_duration,
// 1 x 16384 H64): prep 2.52 ms at commit a4addf3 (the former 1024-thread, one-CTA-per-SM prep: 3.04 ms in
// the same run), walk 1.46 ms (256 chunks x 5.7 us, 128 CTAs); 1 x 65536 H8: walk 3.8 ms (1024 chunks x
// 3.7 us on 32 CTAs: most SMs idle). ncu of that prep: two CTAs per SM as planned (31 of 32 warps active),
// 66 K warp instructions per chunk-head (90 K before), half of them and 64% of the stall samples in the row
// loads (generic dtype / gate branches per element, predicated double loads): prep.cuh's bf16 fast path
// (commit f4477f6, not yet measured) removes those. Traffic per token-head ~1 KB inputs + 1.7 KB scratch
// written + ~2.5 KB read by the walk (much of it from L2) + 256 B o.
// Session 5 (runs 11-13, docs/gpu/2026-11-30-h200-run1{1,2,3}.txt): the walk's one pass over S for U and Qg S
// (walk 1.35 -> 1.23 ms) and its swizzled cp.async tiles (1.22 -> 1.17 ms), the prep's bulk row copies (1.50 ->
// 1.47 ms): 1 x 16384 H64 2.810 -> 2.648 ms; ncu puts the walk's bound in shared-memory fragment traffic (see the
// kernel 2 notes) and the prep at 49 K warp instructions per chunk-head, LSU 71% of peak (docs/BENCHMARKS.md).
// Session 6 (runs 15-21): the walk at V tiles of 64 on warpgroup MMA (walk_wgmma.cuh; walk 1.17 -> 0.82 ms), the
// scratch in its shared-memory layout: 1 x 16384 H64 2.648 -> 2.320 ms.
// Session 7 (runs 22-23): the wgmma walk forms Wn and U0 itself from Kg, Tb and V (a third warpgroup), reading V
// from v where it can; the prep stops at Tb (prep 1.44 -> 1.12 ms, walk 0.81 -> 0.86 ms): 2.269 -> 1.982 ms.
// Session 8 (runs 25-28): the prep's rows by tensor-map copies, its row factors in fast math, its diagonal blocks
// on tensor cores for any gate whose data allow it (prep 1.12 -> 1.03 ms; softplus 2.654 -> 2.198 ms): 1.994 ->
// 1.907 ms in one call.
// Session 10 (runs 37-41): walk_rs.cuh, the state in wgmma register operands, the default walk (walk 0.86 -> 0.58
// ms); three prep steps (1.03 -> 0.94 ms): 1 x 16384 H64 1.88 -> 1.55 ms.
// Before that (run 10, docs/BENCHMARKS.md): the prep's stores staged 16-byte coalesced (prep 1.77 -> 1.47 ms),
// the walk's fragments by ldmatrix with U kept row-major (-5%), sequence parallelism for few heads (1 x 65536
// H8: 4.64 -> 2.38 ms). What would close the gap further: the two passes move ~3.4 KB of scratch per token-head
// (written, then read), which alone needs ~0.8 ms at 1 x 16384 H64 at the copy ceiling, against a 1.2 ms target:
// the prep folded into the walk (FlashKDA's structure: 16-row sub-chunks, the state-independent work of chunk c
// + 1 overlapped with the state chain of chunk c by warp specialization, the K-side work shared across the V
// tiles of a head through a CTA cluster), and wgmma for the walk products.
#pragma once

#include <cuda.h>  // CUtensorMap
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/bulk_copy.cuh"
#include "cuda/wgmma.cuh"

#ifdef KIMI_KDA_CHUNK_DEBUG
#include <cassert>
#define KDA_CHUNK_ASSERT(x) assert(x)
#else
#define KDA_CHUNK_ASSERT(x) ((void)0)
#endif


namespace kimi::cuda::kda_chunk {

using bf16 = __nv_bfloat16;

constexpr int kC = 64;  // chunk rows
// Threads of the prep kernel and of the walk (VT = 32: 256) are template parameters; the launcher (chunk.cu) picks
// them.

// Storage dtypes (== int(kimi::DType::...), checked by static_assert in chunk.cu).
enum : int { kDtF32 = 0, kDtBf16 = 1, kDtF16 = 2 };
enum : int { kGateNone = 0, kGateBounded = 1, kGateSoftplus = 2 };

// Scratch arrays, each indexed by chunk-head cid = chunk * H + head (see the header comment). Two forms
// (Params::wn_in_walk): the mma.sync walk reads Wn hi + lo and U0 (wh, wl, u0; kg, tb, vb null); the wgmma walk
// forms Wn = -Tb Kg and U0 = Tb V itself and reads Kg, Tb and V (kg, tb, vb; wh, wl, u0 null).
struct Scratch {
  bf16* qg;      // [cid][64][D]
  bf16* aqk;     // [cid][64][64] (upper triangle zero)
  bf16* kdt;     // [cid][D][64]
  float* decay;  // [cid][D]
  bf16* wh;      // [cid][64][D]  Wn = -Tb Kg, hi
  bf16* wl;      // [cid][64][D]  lo
  float* u0;     // [cid][64][D]  U0 = Tb V
  bf16* kg;      // [cid][64][D]  Kg = k exp(G)
  bf16* tb;      // [cid][64][64] Tb = T diag(beta) (blocks above the diagonal zero)
  bf16* vb;      // [cid][64][D]  v as bf16 (rows beyond the sequence end zero); null with Params::v_in_walk
};

// Bytes of each scratch array per chunk-head, in the order of Scratch (all multiples of 256); total(wn_in_walk):
// the arrays of one form.
template <int D>
struct ScratchBytes {
  static constexpr size_t qg = size_t(kC) * D * 2, aqk = size_t(kC) * kC * 2, kdt = size_t(D) * kC * 2,
                          decay = size_t(D) * 4, wh = size_t(kC) * D * 2, wl = wh, u0 = size_t(kC) * D * 4,
                          kg = size_t(kC) * D * 2, tb = size_t(kC) * kC * 2, vb = size_t(kC) * D * 2;
  static constexpr size_t total(bool wn_in_walk, bool v_in_walk) {
    return qg + aqk + kdt + decay + (wn_in_walk ? kg + tb + (v_in_walk ? 0 : vb) : wh + wl + u0);
  }
};
static_assert(ScratchBytes<128>::total(false, false) == 107008 && ScratchBytes<64>::total(false, false) == 57600 &&
                  ScratchBytes<128>::total(true, false) == 82432 && ScratchBytes<64>::total(true, false) == 49408 &&
                  ScratchBytes<128>::total(true, true) == 66048 && ScratchBytes<64>::total(true, true) == 41216,
              "documented sizes");

// Element offset of (row r, column c) in a scratch bf16 tile of R rows (Qg, Wn hi / lo, A_qk: R = 64; KdT: R = D):
// the wgmma walk's shared-memory layout (header: "Scratch").
template <int R>
__device__ __forceinline__ int scr_tile_off(int r, int c) {
  return wgmma::sw128_off<R>(r, c);
}
// Element offset of U0 (row t, column v) in its [64][D] fp32 scratch tile (header: "Scratch").
__device__ __forceinline__ int scr_u0_off(int t, int v) {
  return (v >> 6) * (kC * 64) + t * 64 + ((((v & 63) >> 2) ^ (t & 7)) << 2) + (v & 3);
}

struct Params {
  const void* q;
  const void* k;
  const void* v;
  const void* g;
  const void* beta;
  void* o;
  int dt_q, dt_k, dt_v, dt_g, dt_beta, dt_o;
  int64_t s_q[3], s_k[3], s_v[3], s_g[3], s_beta[3], s_o[3];  // element strides of dims B, T, H
  const float* A_log;
  int64_t s_A;
  const float* dt_bias;  // [H * D] contiguous
  int gate;              // kGate*
  float lb;
  int beta_sigmoid, l2norm;
  float scale;
  const float* s0;  // initial state or null
  float* s1;        // final state or null (may equal s0)
  int vk;           // state layout [N, H, V, K]
  int rows_bf16;    // q, k, v, g all bf16 with 8-byte aligned row pieces: the prep's fast row loads (launcher)
  int rows_bulk;    // ... and 16-byte aligned rows: the prep's rows by tensor-map copies (launcher)
  // rows_bulk: q, k, v, g (in that order) as 4-d bf16 tensors, innermost first {D channels, H, T, B} at their
  // strides, box {D + 8, 1, 64, 1}: one chunk-head's 64 rows land in the prep's padded [64][D + 8] rows in one copy
  // (the 8 pad columns lie beyond the D channels: zero-filled), rows past T as zeros (chunk.cu encode_row_tiles)
  CUtensorMap rows_map[4];
  int wn_in_walk;   // the scratch form (Scratch): Kg, Tb, V for the wgmma walk, else Wn hi + lo, U0
  int v_in_walk;    // (wn_in_walk and rows_bulk) the wgmma walk reads its V tiles from v: no vb scratch, and the
                    // prep does not load v
  int o_rows16;     // o bf16 with 16-byte aligned rows: walk_rs.cuh stages O in shared memory, stored 16 bytes a piece
  const int64_t* tab;   // device chunk table [3 * nch]: first token, batch row, rows
  const int64_t* seq0;  // device [N + 1]: first chunk of each sequence, seq0[N] = nch
  int64_t nch;
  int H, N;
  Scratch scr;
  // Sequence parallelism (the header's "Segments" paragraph); walk_mode kWalkPlain ignores the rest.
  int walk_mode;            // kWalkPlain, kWalkMaps (phase 1) or kWalkFinish (phase 3)
  const int64_t* seg;       // device [kSegFields * nseg]: first chunk, end chunk, sequence, index j, count P
  const int64_t* segbase;   // device [N + 1]: first segment of each sequence
  int64_t nseg;
  float* seg_start;  // [nseg][H][D][D] fp32, rows v, columns k: S^T at the start of segment g (C_{g-1}^T first)
  float* seg_map;    // [nseg][H][D][D] fp32: row i = M_g e_i (column i of segment g's state map)
};

// Walk modes (Params::walk_mode) and the segment table row (Params::seg).
enum : int { kWalkPlain = 0, kWalkMaps = 1, kWalkFinish = 2 };
enum : int { kSegBeg = 0, kSegEnd = 1, kSegSeq = 2, kSegIdx = 3, kSegCount = 4, kSegFields = 5 };

// The walk unit of one walk CTA (the header's "Segments" paragraph): its sequence, head and V tile, its chunks, where
// its state starts (src: s0 or zero, zero, the scratch, the identity columns) and ends (dst: s1 if given, nowhere,
// the scratch), whether it writes outputs and whether it walks value columns (U0 / the V term) or identity ones.
// Grid: units x H x nvx, nvx = NV V tiles of VT (2 NV in phase 1: the value tiles, then the identity tiles).
enum : int { kSrcUser = 0, kSrcZero = 1, kSrcScratch = 2, kSrcIdentity = 3 };
enum : int { kDstUser = 0, kDstNone = 1, kDstScratch = 2 };
struct WalkUnit {
  int64_t n, cbeg, cend;  // sequence, chunks [cbeg, cend)
  int h, v0;              // head; first V column (value tile) or first identity row (identity tile)
  int src, dst;           // kSrc*, kDst*
  bool outs, ident;       // writes o; identity columns (U0 = 0, no V term)
  bool idle;              // nothing to do in this phase: the CTA returns
  const float* src_p;     // kSrcScratch: [D][D] rows v, columns k
  float* dst_p;           // kDstScratch: [D][D]
};
template <int D, int VT>
__device__ __forceinline__ WalkUnit walk_unit(const Params& p, int bid) {
  constexpr int NV = D / VT;
  const int nvx = p.walk_mode == kWalkMaps ? 2 * NV : NV;
  const int vt = bid % nvx;
  WalkUnit u{};
  u.h = (bid / nvx) % p.H;
  u.v0 = (vt % NV) * VT;
  u.src = kSrcUser, u.dst = kDstUser;
  u.outs = true;
  const int64_t unit = bid / (nvx * p.H);
  if (p.walk_mode == kWalkPlain) {
    u.n = unit;
    KDA_CHUNK_ASSERT(u.n < p.N);
    u.cbeg = p.seq0[u.n];
    u.cend = p.seq0[u.n + 1];
    return u;
  }
  const int64_t* e = p.seg + kSegFields * unit;
  u.cbeg = e[kSegBeg], u.cend = e[kSegEnd], u.n = e[kSegSeq];
  const int64_t j = e[kSegIdx], P = e[kSegCount];
  const size_t blk = size_t(D) * D;
  float* const next_start = p.seg_start + (size_t(unit + 1) * p.H + u.h) * blk;
  if (p.walk_mode == kWalkMaps) {
    if (j == P - 1 && P > 1) {  // last segment: phase 3 only
      u.idle = true;
    } else if (j == 0) {  // from the initial state, with outputs: an ordinary walk
      u.idle = vt >= NV;
      if (P > 1) u.dst = kDstScratch, u.dst_p = next_start;
    } else {  // a middle segment's map: C_j (values from S = 0) and M_j (identity columns, U0 = 0)
      u.ident = vt >= NV;
      u.outs = false;
      u.src = u.ident ? kSrcIdentity : kSrcZero;
      u.dst = kDstScratch;
      u.dst_p = u.ident ? p.seg_map + (size_t(unit) * p.H + u.h) * blk : next_start;
    }
  } else {  // kWalkFinish: segments j >= 1 from their start state in scratch (never from s0: s1 may alias it)
    u.idle = j == 0;
    u.src = kSrcScratch, u.src_p = p.seg_start + (size_t(unit) * p.H + u.h) * blk;
    if (j < P - 1) u.dst = kDstNone;
  }
  return u;
}

// Offset of element (column j, key channel kk) of the state of (sequence n, head h) in s0 / s1 ([N][H][D][D], rows
// j (vk) or kk (kv)).
template <int D>
__device__ __forceinline__ int64_t user_state_index(const Params& p, int64_t n, int h, int j, int kk) {
  const int64_t base = (n * p.H + h) * int64_t(D) * D;
  return p.vk ? base + int64_t(j) * D + kk : base + int64_t(kk) * D + j;
}
// Where a walk CTA's state starts (WalkUnit::src), as one strided read or none: element (column j, key channel kk) at
// m[j sj + kk skk] (s0 in its layout, or the segment start in the scratch, rows j), else the identity columns or zero.
// Built once per CTA: the start loads are one predicated batch, no per-element branch on the source (walk_rs.cuh
// ~1000 SASS instructions shorter than with the per-element rule; times in docs/gpu run 52).
struct StartState {
  const float* m;  // null: zero or identity
  int sj, skk;
  bool ident;
  template <int D>
  __device__ __forceinline__ static StartState of(const Params& p, const WalkUnit& u) {
    if (u.src == kSrcUser && p.s0)
      return {p.s0 + user_state_index<D>(p, u.n, u.h, 0, 0), p.vk ? D : 1, p.vk ? 1 : D, false};
    if (u.src == kSrcScratch) return {u.src_p, D, 1, false};
    return {nullptr, 0, 0, u.src == kSrcIdentity};
  }
  __device__ __forceinline__ float at(int j, int kk) const {
    const float x = m ? __ldcg(m + j * sj + kk * skk) : 0.f;  // read once: L2 only
    return ident && j == kk ? 1.f : x;
  }
};

// Walk kernel shared memory: S^T hi, lo bf16 [VT][LDB] (the fp32 state itself lives in registers); two input
// buffers {Wn hi, Wn lo [64][LDW], U0 fp32 [64][LDU], KdT [D][LDT], decay [D]}; U hi, lo bf16 [64][LDV]
// (row-major, as its accumulators hold it; its products read it through ldmatrix.trans); one buffer of the output
// operands Qg [64][LDW], A_qk [64][LDT].
template <int D, int VT>
struct WalkSmem {
  // LDB: the padded rows of S^T hi / lo (written by sts_split); the cp.async destinations Wn hi / lo, Qg [64][D]
  // and KdT [D][64], A_qk [64][64] are dense rows with the 16-byte chunks of row r XOR-permuted by r & 7
  // (tile_off; the kSwz flags of cp_tile_g2s / ld_a_frag / ld_b_frags / warp_mma*): padded rows cost the 16-byte
  // cp.async stores 2.6x the ideal shared-memory wavefronts on the H200 (ncu, run 11), swizzled ones are
  // conflict-free both ways. U0 (fp32, read as float2) keeps padded rows. kSwz = false gives the padded rows back
  // (run 12: walk 1.22 ms against 1.17 swizzled at 1 x 16384 H64).
  static constexpr bool kSwz = true;
  static constexpr int LDB = D + 8, LDW = kSwz ? D : D + 8, LDT = kSwz ? kC : kC + 8, LDU = VT + 8, LDV = VT + 8;
  static constexpr size_t SH = 0, SL = SH + size_t(VT) * LDB * 2;  // S^T hi, lo bf16 [VT][LDB]
  static constexpr size_t kWh = size_t(kC) * LDW * 2, kU0 = size_t(kC) * LDU * 4, kKdt = size_t(D) * LDT * 2,
                          kDec = size_t(D) * 4;
  static constexpr size_t BWH = 0, BWL = BWH + kWh, BU0 = BWL + kWh, BKDT = BU0 + kU0, BDEC = BKDT + kKdt;
  static constexpr size_t kBuf = BDEC + kDec;  // one input buffer
  static constexpr size_t BUF0 = SL + size_t(VT) * LDB * 2;
  static constexpr size_t UH = BUF0 + 2 * kBuf;           // U hi bf16 [64][LDV]
  static constexpr size_t UL = UH + size_t(kC) * LDV * 2;  // U lo
  static constexpr size_t QG = UL + size_t(kC) * LDV * 2;  // Qg [64][LDW] (swizzled)
  static constexpr size_t AQK = QG + size_t(kC) * LDW * 2;  // A_qk [64][LDT] (swizzled)
  static constexpr size_t TOTAL = AQK + size_t(kC) * LDT * 2;
  static_assert(D % VT == 0 && (VT == 32 || VT == 64), "tile shapes");
  static_assert(LDB % 8 == 0 && LDV % 8 == 0, "ldmatrix rows 16-byte aligned");
  static_assert(BUF0 % 128 == 0 && kBuf % 128 == 0 && BWL % 128 == 0 && BU0 % 128 == 0 && BKDT % 128 == 0 &&
                    BDEC % 16 == 0 && UH % 16 == 0 && UL % 16 == 0 && QG % 128 == 0 && AQK % 128 == 0,
                "16-byte aligned regions, 128-byte aligned swizzled tiles");
  static_assert(TOTAL <= 227 * 1024, "fits the sm_90 shared memory of one CTA");
};
static_assert(WalkSmem<128, 32>::TOTAL == 172032, "documented size");

// ---------------------------------------------------------------------------------------------------------
// small helpers

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));  // d.hi = a, d.lo = b
  return r;
}
__device__ __forceinline__ float bf_lo(uint32_t u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float bf_hi(uint32_t u) { return __uint_as_float(u & 0xffff0000u); }
__device__ __forceinline__ uint32_t lds32(const bf16* p) { return *reinterpret_cast<const uint32_t*>(p); }
__device__ __forceinline__ void sts32(bf16* p, uint32_t v) { *reinterpret_cast<uint32_t*>(p) = v; }
__device__ __forceinline__ float bf2f(bf16 x) { return __bfloat162float(x); }
// The bf16 hi + lo split of two adjacent fp32 values x0, x1 (hi = bf16(x) = pack_bf16(x0, x1), lo = bf16(x - hi):
// ~16 bits of x): the lo pair of the hi pair h, the one rule behind every split operand of the walks and the prep.
__device__ __forceinline__ uint32_t split_lo(float x0, float x1, uint32_t h) {
  return pack_bf16(x0 - bf_lo(h), x1 - bf_hi(h));
}
// The split of x0, x1 at hi + o and lo + o (32-bit stores; o even).
__device__ __forceinline__ void sts_split(bf16* hi, bf16* lo, int o, float x0, float x1) {
  const uint32_t h = pack_bf16(x0, x1);
  sts32(hi + o, h);
  sts32(lo + o, split_lo(x0, x1, h));
}

__device__ __forceinline__ float u16_to_f32(uint32_t h, int dt) {
  return dt == kDtBf16 ? __uint_as_float(h << 16) : __half2float(__ushort_as_half(static_cast<unsigned short>(h)));
}

// Raw bits of N (1, 2 or 4) consecutive elements of a float tensor of runtime dtype dt at element offset off:
// f32 -> w[e] = bits of element e; 16-bit -> w[e / 2] holds elements e (low half) and e + 1. No arithmetic on
// the loaded words here, so that a thread's loads are all in flight before the first conversion
// (raw_to_f32) waits for them.
template <int N>
__device__ __forceinline__ void load_raw(const void* base, int dt, int64_t off, uint32_t (&w)[N]) {
  if (dt == kDtF32) {
    const float* p = static_cast<const float*>(base) + off;
    if (N == 4 && (reinterpret_cast<uintptr_t>(p) & 15) == 0) {
      const uint4 u = *reinterpret_cast<const uint4*>(p);
      const uint32_t x[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
      for (int e = 0; e < N; ++e) w[e] = x[e];
    } else if (N == 2 && (reinterpret_cast<uintptr_t>(p) & 7) == 0) {
      const uint2 u = *reinterpret_cast<const uint2*>(p);
      const uint32_t x[2] = {u.x, u.y};
#pragma unroll
      for (int e = 0; e < N; ++e) w[e] = x[e];
    } else {
#pragma unroll
      for (int e = 0; e < N; ++e) w[e] = __float_as_uint(p[e]);
    }
  } else {
    const unsigned short* p = static_cast<const unsigned short*>(base) + off;
    if (N == 4 && (reinterpret_cast<uintptr_t>(p) & 7) == 0) {
      const uint2 u = *reinterpret_cast<const uint2*>(p);
      w[0] = u.x;
      w[N > 1 ? 1 : 0] = u.y;
    } else if (N == 2 && (reinterpret_cast<uintptr_t>(p) & 3) == 0) {
      w[0] = *reinterpret_cast<const uint32_t*>(p);
    } else if (N == 1) {
      w[0] = p[0];
    } else {
#pragma unroll
      for (int e = 0; e < N; e += 2) w[e / 2] = uint32_t(p[e]) | (uint32_t(p[e + 1]) << 16);
    }
  }
}
template <int N>
__device__ __forceinline__ void raw_to_f32(const uint32_t (&w)[N], int dt, float (&x)[N]) {
#pragma unroll
  for (int e = 0; e < N; ++e)
    x[e] = dt == kDtF32 ? __uint_as_float(w[e]) : u16_to_f32((w[e / 2] >> (16 * (e & 1))) & 0xffffu, dt);
}

// Two consecutive elements a, b at element offset off of a float tensor of runtime dtype dt.
__device__ __forceinline__ void store_2(void* base, int dt, int64_t off, float a, float b) {
  if (dt == kDtF32) {
    float* p = static_cast<float*>(base) + off;
    if ((reinterpret_cast<uintptr_t>(p) & 7) == 0) {
      *reinterpret_cast<float2*>(p) = make_float2(a, b);
    } else {
      p[0] = a;
      p[1] = b;
    }
  } else if (dt == kDtBf16) {
    bf16* p = static_cast<bf16*>(base) + off;
    if ((reinterpret_cast<uintptr_t>(p) & 3) == 0) {
      *reinterpret_cast<uint32_t*>(p) = pack_bf16(a, b);
    } else {
      p[0] = __float2bfloat16_rn(a);
      p[1] = __float2bfloat16_rn(b);
    }
  } else {
    __half* p = static_cast<__half*>(base) + off;
    if ((reinterpret_cast<uintptr_t>(p) & 3) == 0) {
      *reinterpret_cast<__half2*>(p) = __floats2half2_rn(a, b);
    } else {
      p[0] = __float2half_rn(a);
      p[1] = __float2half_rn(b);
    }
  }
}
// 16-byte global store (explicit: the compiler split reinterpret_cast uint4 stores into four 4-byte ones).
__device__ __forceinline__ void stg128(void* g, uint4 v) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(g), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// One element a at element offset off of a float tensor of runtime dtype dt.
__device__ __forceinline__ void store_1(void* base, int dt, int64_t off, float a) {
  if (dt == kDtF32)
    static_cast<float*>(base)[off] = a;
  else if (dt == kDtBf16)
    static_cast<bf16*>(base)[off] = __float2bfloat16_rn(a);
  else
    static_cast<__half*>(base)[off] = __float2half_rn(a);
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Four (x4) or two (x2) 8 x 8 bf16 matrices from shared memory: lane l gives the address of row l & 7 of matrix
// l >> 3 (x2: lanes 0 .. 15) and receives r[m] = {M_m[l / 4][2 (l % 4)], M_m[l / 4][2 (l % 4) + 1]}, or with .trans
// r[m] = {M_m[2 (l % 4)][l / 4], M_m[2 (l % 4) + 1][l / 4]}. Each row is 16 bytes, 16-byte aligned.
template <bool kTrans>
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const bf16* p) {
  const uint32_t a = smem_u32(p);
  if constexpr (kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a)
                 : "memory");
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a)
                 : "memory");
}
template <bool kTrans>
__device__ __forceinline__ void ldsm_x2(uint32_t (&r)[2], const bf16* p) {
  const uint32_t a = smem_u32(p);
  if constexpr (kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(a)
                 : "memory");
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(a) : "memory");
}

// Four 8 x 8 bf16 matrices to shared memory (stmatrix.x4): lane l gives the address of row l & 7 of matrix l >> 3
// (16 bytes, 16-byte aligned); r[m] holds in lane l matrix m's pair (row l / 4, columns 2 (l % 4), + 1): the mma /
// wgmma accumulator fragment packed to bf16 pairs.
__device__ __forceinline__ void stsm_x4(bf16* p, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(smem_u32(p)), "r"(r[0]),
               "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}
// stsm_x4 with each matrix stored transposed (stmatrix .trans): lane l gives the address of stored row l & 7 of
// matrix l >> 3, i.e. of column l & 7 of the fragment's matrix; the registers as for stsm_x4.
__device__ __forceinline__ void stsm_x4_trans(bf16* p, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(smem_u32(p)),
               "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

// Element offset of (row, col) in bf16 rows of ld elements; kSwz: the row's 16-byte chunks XOR-permuted by
// row & 7 (rows of 64 or 128 elements starting 128-byte aligned; col a multiple of 8 here), so that the 8 rows of
// an ldmatrix matrix, and the 16-byte cp.async stores of consecutive rows, fall on distinct banks without padding.
template <bool kSwz>
__device__ __forceinline__ int tile_off(int row, int col, int ld) {
  return row * ld + (kSwz ? (((col >> 3) ^ (row & 7)) << 3) | (col & 7) : col);
}

// Fragments of mma.m16n8k16 (g = lane / 4, t = lane % 4): a0 = A[g][2t..], a1 = A[g+8][2t..],
// a2 = A[g][2t+8..], a3 = A[g+8][2t+8..]; b0 = B[2t..][g] = Bt[g][2t..], b1 = Bt[g][2t+8..];
// c0, c1 = C[g][2t, 2t+1], c2, c3 = C[g+8][2t, 2t+1].
// Loaded by ldmatrix. The A fragment of rows m .. m + 16, columns k0 .. k0 + 16 is one x4 (matrices: m + 0 / + 8
// by k + 0 / + 8 -> a0 .. a3), from A stored row-major [m][k] (kTrans = false) or as its transpose [k][m] (.trans).
// The B fragments of two n8 tiles are one x4 (matrices: tile j k + 0 / + 8, tile j + 1 k + 0 / + 8), an odd last
// tile one x2, from B stored as Bt [n][k] (kTrans = false) or row-major [k][n] (.trans). One instruction per 4 (or
// 2) 32-bit fragment registers instead of one each. kSwz: A or Bt in swizzled rows (tile_off), read untransposed.
template <bool kTrans, bool kSwz = false>
__device__ __forceinline__ void ld_a_frag(uint32_t (&a)[4], const bf16* A, int lda, int m, int k0, int lane) {
  static_assert(!(kTrans && kSwz), "swizzled tiles are read untransposed");
  if constexpr (kTrans)
    ldsm_x4<true>(a, A + (k0 + (lane & 7) + 8 * (lane >> 4)) * lda + m + 8 * ((lane >> 3) & 1));
  else
    ldsm_x4<false>(a, A + tile_off<kSwz>(m + (lane & 7) + 8 * ((lane >> 3) & 1), k0 + 8 * (lane >> 4), lda));
}
template <int NT, bool kTrans, bool kSwz = false>
__device__ __forceinline__ void ld_b_frags(uint32_t (&b)[NT][2], const bf16* B, int ldb, int n0, int k0, int lane) {
  static_assert(!(kTrans && kSwz), "swizzled tiles are read untransposed");
#pragma unroll
  for (int j = 0; j + 1 < NT; j += 2) {
    uint32_t r[4];
    if constexpr (kTrans)
      ldsm_x4<true>(r, B + (k0 + (lane & 15)) * ldb + n0 + 8 * j + 8 * (lane >> 4));
    else
      ldsm_x4<false>(r, B + tile_off<kSwz>(n0 + 8 * j + (lane & 7) + 8 * (lane >> 4), k0 + 8 * ((lane >> 3) & 1),
                                           ldb));
    b[j][0] = r[0], b[j][1] = r[1], b[j + 1][0] = r[2], b[j + 1][1] = r[3];
  }
  if constexpr (NT % 2 == 1) {
    uint32_t r[2];
    if constexpr (kTrans)
      ldsm_x2<true>(r, B + (k0 + (lane & 15)) * ldb + n0 + 8 * (NT - 1));
    else
      ldsm_x2<false>(r, B + tile_off<kSwz>(n0 + 8 * (NT - 1) + (lane & 7), k0 + 8 * ((lane >> 3) & 1), ldb));
    b[NT - 1][0] = r[0], b[NT - 1][1] = r[1];
  }
}

// acc[i][j] += A[m0 + 16 i .. +16][0..KD) * Bt[n0 + 8 j .. +8][0..KD)^T for one warp.
// A: bf16 row-major [m][k] (lda elements), or [k][m] with kAT; Bt: bf16 [n][k] row-major (ldb elements), or B
// [k][n] with kBT; rows 16-byte aligned (lda, ldb multiples of 8). kAlo: A given as hi (A) + lo (A_lo), one more
// mma per fragment. kBSwz: Bt in swizzled rows (tile_off).
template <int MT, int NT, int KD, bool kAlo = false, bool kAT = false, bool kBT = false, bool kBSwz = false>
__device__ __forceinline__ void warp_mma(float (&acc)[MT][NT][4], const bf16* A, int lda, int m0, const bf16* Bt,
                                         int ldb, int n0, int lane, const bf16* A_lo = nullptr) {
#pragma unroll
  for (int k0 = 0; k0 < KD; k0 += 16) {
    uint32_t a[MT][4], b[NT][2];
    [[maybe_unused]] uint32_t al[MT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      ld_a_frag<kAT>(a[i], A, lda, m0 + 16 * i, k0, lane);
      if constexpr (kAlo) ld_a_frag<kAT>(al[i], A_lo, lda, m0 + 16 * i, k0, lane);
    }
    ld_b_frags<NT, kBT, kBSwz>(b, Bt, ldb, n0, k0, lane);
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        mma_bf16(acc[i][j], a[i], b[j]);
        if constexpr (kAlo) mma_bf16(acc[i][j], al[i], b[j]);
      }
  }
}

// warp_mma with Bt given as bf16 hi (Bt) + lo (Bt_lo) and optionally A as hi + lo (kAlo), the correction
// products on separate accumulators: acc += A Bt, acc_b += A Bt_lo, acc_c += A_lo Bt (the caller adds them).
// The dependent mma chain per accumulator is KD / 16 instead of 2 or 3 KD / 16 (the walk's latency path).
// kBT: B (and B_lo) stored row-major [k][n] (see warp_mma). kASwz: A (and A_lo, A2) in swizzled rows (tile_off).
// kA2: a second A operand A2 (single bf16, same layout as A) against the same B, acc2 += A2 Bt and acc2_b +=
// A2 Bt_lo, so that each B fragment is loaded once for both. The walk's U = U0 + Wn S and the Qg S half of O
// read the same S^T hi + lo: one pass instead of two saves a third of their shared-memory fragment traffic (the
// walk's bound).
template <int MT, int NT, int KD, bool kAlo, bool kBT = false, bool kASwz = false, bool kA2 = false>
__device__ __forceinline__ void warp_mma_split(float (&acc)[MT][NT][4], float (&acc_b)[MT][NT][4],
                                               float (&acc_c)[MT][NT][4], const bf16* A, int lda, int m0,
                                               const bf16* Bt, int ldb, int n0, int lane, const bf16* A_lo,
                                               const bf16* Bt_lo, const bf16* A2 = nullptr,
                                               float (*acc2)[NT][4] = nullptr, float (*acc2_b)[NT][4] = nullptr) {
#pragma unroll
  for (int k0 = 0; k0 < KD; k0 += 16) {
    uint32_t a[MT][4], b[NT][2], bl[NT][2];
    [[maybe_unused]] uint32_t al[MT][4], a2[MT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      ld_a_frag<false, kASwz>(a[i], A, lda, m0 + 16 * i, k0, lane);
      if constexpr (kAlo) ld_a_frag<false, kASwz>(al[i], A_lo, lda, m0 + 16 * i, k0, lane);
      if constexpr (kA2) ld_a_frag<false, kASwz>(a2[i], A2, lda, m0 + 16 * i, k0, lane);
    }
    ld_b_frags<NT, kBT>(b, Bt, ldb, n0, k0, lane);
    ld_b_frags<NT, kBT>(bl, Bt_lo, ldb, n0, k0, lane);
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        mma_bf16(acc[i][j], a[i], b[j]);
        mma_bf16(acc_b[i][j], a[i], bl[j]);
        if constexpr (kAlo) mma_bf16(acc_c[i][j], al[i], b[j]);
        if constexpr (kA2) {
          mma_bf16(acc2[i][j], a2[i], b[j]);
          mma_bf16(acc2_b[i][j], a2[i], bl[j]);
        }
      }
  }
}

// ---------------------------------------------------------------------------------------------------------
// copies

__device__ __forceinline__ void cp_async16(void* smem_dst, const void* gmem_src) {
  const uint32_t d = smem_u32(smem_dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(gmem_src) : "memory");
}
// The same, reading nothing and writing 16 zero bytes where !valid (gmem_src must still be a valid address form).
__device__ __forceinline__ void cp_async16_zfill(void* smem_dst, const void* gmem_src, bool valid) {
  const uint32_t d = smem_u32(smem_dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(gmem_src), "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Where cp_tile_g2s finds element (r, col0 + c) of its global tile g: dense rows of ldg elements, a scratch bf16
// tile of ROWS rows (scr_tile_off) or the U0 scratch tile (scr_u0_off).
enum : int { kGatherRows = 0, kGatherTile = 1, kGatherU0 = 2 };

// ROWS x COLS elements of type E (COLS * sizeof(E) a multiple of 16), columns col0 .. of the global tile g (layout
// kFrom) -> shared (row stride lds elements, 16-byte aligned rows), cp.async by NTHR threads. kSwz: bf16 rows of 64
// or 128 elements (lds == COLS) in the swizzled layout of tile_off.
template <typename E, int ROWS, int COLS, int NTHR, bool kSwz = false, int kFrom = kGatherRows>
__device__ __forceinline__ void cp_tile_g2s(E* s, int lds, const E* g, int64_t ldg, int tid, int col0 = 0) {
  constexpr int PER = 16 / int(sizeof(E)), CPR = COLS / PER;
  static_assert(COLS % PER == 0, "16-byte rows");
  static_assert(!kSwz || (sizeof(E) == 2 && (COLS == 64 || COLS == 128)), "swizzled rows: bf16, 8 or 16 chunks");
  static_assert(kFrom != kGatherTile || sizeof(E) == 2, "scratch tiles are bf16");
  static_assert(kFrom != kGatherU0 || sizeof(E) == 4, "U0 is fp32");
  constexpr int NIT = (ROWS * CPR + NTHR - 1) / NTHR;
#pragma unroll
  for (int it = 0; it < NIT; ++it) {
    const int e = tid + it * NTHR;
    if ((ROWS * CPR) % NTHR == 0 || e < ROWS * CPR) {
      const int r = e / CPR, c = (e % CPR) * PER;
      const E* const src = kFrom == kGatherTile ? g + scr_tile_off<ROWS>(r, col0 + c)
                           : kFrom == kGatherU0 ? g + scr_u0_off(r, col0 + c)
                                                : g + r * ldg + col0 + c;  // ldg: kGatherRows only
      cp_async16(s + (kSwz ? tile_off<true>(r, c, lds) : r * lds + c), src);
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// kernel 2: sequential walk over the chunks of one (sequence, head, V tile)

template <int D, int VT, int NTHR>
__device__ __forceinline__ void walk_prefetch(const Params& p, unsigned char* buf, int64_t cid, int v0, int tid,
                                              bool u0 = true) {
  using L = WalkSmem<D, VT>;
  constexpr bool S = L::kSwz;
  bf16* const wh = reinterpret_cast<bf16*>(buf + L::BWH);
  bf16* const wl = reinterpret_cast<bf16*>(buf + L::BWL);
  cp_tile_g2s<bf16, kC, D, NTHR, S, kGatherTile>(wh, L::LDW, p.scr.wh + cid * (kC * D), 0, tid);
  cp_tile_g2s<bf16, kC, D, NTHR, S, kGatherTile>(wl, L::LDW, p.scr.wl + cid * (kC * D), 0, tid);
  if (u0)  // identity columns of a segment map: U0 = 0, not loaded
    cp_tile_g2s<float, kC, VT, NTHR, false, kGatherU0>(reinterpret_cast<float*>(buf + L::BU0), L::LDU,
                                                    p.scr.u0 + cid * (kC * D), 0, tid, v0);
  cp_tile_g2s<bf16, D, kC, NTHR, S, kGatherTile>(reinterpret_cast<bf16*>(buf + L::BKDT), L::LDT,
                                              p.scr.kdt + cid * (D * kC), 0, tid);
  cp_tile_g2s<float, 1, D, NTHR>(reinterpret_cast<float*>(buf + L::BDEC), D, p.scr.decay + cid * D, D, tid);
}

template <int D, int VT, int NTHR>
__device__ __forceinline__ void walk_prefetch_out(const Params& p, unsigned char* smem, int64_t cid, int tid) {
  using L = WalkSmem<D, VT>;
  constexpr bool S = L::kSwz;
  cp_tile_g2s<bf16, kC, D, NTHR, S, kGatherTile>(reinterpret_cast<bf16*>(smem + L::QG), L::LDW,
                                              p.scr.qg + cid * (kC * D), 0, tid);
  cp_tile_g2s<bf16, kC, kC, NTHR, S, kGatherTile>(reinterpret_cast<bf16*>(smem + L::AQK), L::LDT,
                                               p.scr.aqk + cid * (kC * kC), 0, tid);
}

template <int D, int VT, int NTHR>
__global__ void __launch_bounds__(NTHR, 1) kda_chunk_walk(const Params p) {
  using L = WalkSmem<D, VT>;
  constexpr int NW = NTHR / 32;
  static_assert(VT == 32 && NTHR == 256, "the launched form (V tiles of 64: walk_wgmma.cuh since session 6)");
  constexpr int LDB = L::LDB, LDW = L::LDW, LDT = L::LDT, LDU = L::LDU, LDV = L::LDV;
  extern __shared__ __align__(128) unsigned char smem[];  // the swizzled tiles need 128-byte aligned rows
  bf16* const sSh = reinterpret_cast<bf16*>(smem + L::SH);  // S^T hi [VT][LDB]
  bf16* const sSl = reinterpret_cast<bf16*>(smem + L::SL);  // S^T lo [VT][LDB]
  bf16* const sUh = reinterpret_cast<bf16*>(smem + L::UH);  // U hi [64][LDV]
  bf16* const sUl = reinterpret_cast<bf16*>(smem + L::UL);  // U lo [64][LDV]
  const bf16* const sQg = reinterpret_cast<const bf16*>(smem + L::QG);   // Qg [64][LDW]
  const bf16* const sAqk = reinterpret_cast<const bf16*>(smem + L::AQK);  // A_qk [64][LDT]

  KDA_CHUNK_ASSERT(blockDim.x == NTHR && !p.wn_in_walk);  // reads Wn hi + lo and U0
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int gq = lane >> 2, tq = lane & 3;  // mma fragment coordinates

  const WalkUnit u = walk_unit<D, VT>(p, int(blockIdx.x));
  if (u.idle) return;
  const int h = u.h, v0 = u.v0, dst = u.dst;
  const int64_t n = u.n, cbeg = u.cbeg, cend = u.cend;
  const bool outs = u.outs, ident = u.ident;
  float* const dst_p = u.dst_p;

  // cp.async groups: the inputs of chunk c (buffer c & 1) are committed at the top of iteration c - 1, its
  // output operands (Qg, A_qk, single buffer) at the end of iteration c - 1, after every read of chunk c - 1's;
  // so the wait_group 1 after the top commit of iteration c leaves only chunk c + 1's inputs in flight.
  if (cbeg < cend) walk_prefetch<D, VT, NTHR>(p, smem + L::BUF0, cbeg * p.H + h, v0, tid, !ident);
  cp_async_commit();
  if (cbeg < cend && outs) walk_prefetch_out<D, VT, NTHR>(p, smem, cbeg * p.H + h, tid);
  cp_async_commit();

  constexpr int WM = NW / 4, MT = 4 / WM;  // WM x 4 warp grid; MT m16 tiles of the 64 rows per warp
  static_assert(WM * 4 == NW && MT * WM == 4, "warp grid");
  const int wm = warp >> 2, wn = warp & 3;
  constexpr int NT = VT / 32;  // n8 tiles per warp over VT / 4 columns

  // The fp32 state S^T [VT][D] lives in registers, in the accumulator layout of the state update: warp w
  // owns rows m0 = 16 (w / WN7) .. + 16, columns n07 = (w % WN7) D / WN7 .. + D / WN7; st[0][nt][2 rr + cc] is
  // S^T[v][kk] with v = m0 + gq + 8 rr, kk = n07 + 8 nt + 2 tq + cc. Its bf16 hi + lo split (hi = bf16(x), lo =
  // bf16(x - hi)) is written to sSh / sSl for the two products that read S.
  constexpr int WM7 = VT / 16, WN7 = NW / WM7, MT7 = 1, NT7 = D / (8 * WN7);  // WM7 x WN7 warp grid
  static_assert(WM7 * WN7 == NW && NT7 >= 1 && NT7 * 8 * WN7 == D, "state update tiles");
  const int m0 = 16 * (warp / WN7), n07 = (warp % WN7) * (D / WN7);
  float st[MT7][NT7][4];
  const StartState start = StartState::of<D>(p, u);
  const auto store_split = [&]() {
#pragma unroll
    for (int mt = 0; mt < MT7; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT7; ++nt)
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) {
          const int v = m0 + 16 * mt + gq + 8 * rr, kk = n07 + 8 * nt + 2 * tq;
          sts_split(sSh, sSl, v * LDB + kk, st[mt][nt][2 * rr], st[mt][nt][2 * rr + 1]);
        }
  };
#pragma unroll
  for (int mt = 0; mt < MT7; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT7; ++nt)
#pragma unroll
      for (int rr = 0; rr < 2; ++rr)
#pragma unroll
        for (int cc = 0; cc < 2; ++cc) {
          const int v = m0 + 16 * mt + gq + 8 * rr, kk = n07 + 8 * nt + 2 * tq + cc;
          st[mt][nt][2 * rr + cc] = start.at(v0 + v, kk);
        }
  store_split();  // ordered before the first read by the barrier at the top of the first iteration

#pragma unroll 1
  for (int64_t c = cbeg; c < cend; ++c) {
    const int64_t cid = c * p.H + h;
    unsigned char* const buf = smem + L::BUF0 + size_t((c - cbeg) & 1) * L::kBuf;
    if (c + 1 < cend)  // the other buffer was last read by chunk c - 1, before the barrier in its S update
      walk_prefetch<D, VT, NTHR>(p, smem + L::BUF0 + size_t((c + 1 - cbeg) & 1) * L::kBuf, cid + p.H, v0, tid,
                                 !ident);
    cp_async_commit();
    cp_async_wait<1>();  // chunk c's groups have landed (for this thread)
    __syncthreads();     // ... and for all threads; also orders the S^T hi / lo writes of chunk c - 1
    const bf16* const sWh = reinterpret_cast<const bf16*>(buf + L::BWH);
    const bf16* const sWl = reinterpret_cast<const bf16*>(buf + L::BWL);
    const float* const sU0 = reinterpret_cast<const float*>(buf + L::BU0);
    const bf16* const sKdt = reinterpret_cast<const bf16*>(buf + L::BKDT);
    const float* const sDecay = reinterpret_cast<const float*>(buf + L::BDEC);

    // U = U0 + Wn S -> U^T hi + lo; with outputs, the Qg S half of O in the same pass over S (acc_o, acc_ob)
    const int t0 = (kC / WM) * wm, n0 = wn * (VT / 4);
    float acc_o[MT][NT][4] = {}, acc_ob[MT][NT][4] = {};
    {
      float acc[MT][NT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int rr = 0; rr < 2; ++rr) {
            const int t = t0 + 16 * mt + gq + 8 * rr, v = n0 + 8 * nt + 2 * tq;
            const float2 u = ident ? make_float2(0.f, 0.f) : *reinterpret_cast<const float2*>(sU0 + t * LDU + v);
            acc[mt][nt][2 * rr] = u.x;
            acc[mt][nt][2 * rr + 1] = u.y;
          }
      {
        float acc_b[MT][NT][4] = {}, acc_c[MT][NT][4] = {};
        if (outs)
          warp_mma_split<MT, NT, D, true, false, L::kSwz, true>(acc, acc_b, acc_c, sWh, LDW, t0, sSh, LDB, n0, lane,
                                                                sWl, sSl, sQg, acc_o, acc_ob);
        else
          warp_mma_split<MT, NT, D, true, false, L::kSwz>(acc, acc_b, acc_c, sWh, LDW, t0, sSh, LDB, n0, lane, sWl,
                                                          sSl);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[mt][nt][e] += acc_b[mt][nt][e] + acc_c[mt][nt][e];
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int rr = 0; rr < 2; ++rr) {
            const int t = t0 + 16 * mt + gq + 8 * rr, v = n0 + 8 * nt + 2 * tq;
            sts_split(sUh, sUl, t * LDV + v, acc[mt][nt][2 * rr], acc[mt][nt][2 * rr + 1]);
          }
    }
    __syncthreads();

    // O = Qg S_start (acc_o, acc_ob: from the U pass) + A_qk U (64 x VT; U hi + lo) -> global o (rows in the
    // sequence)
    if (outs) {
      float (&acc)[MT][NT][4] = acc_o;
      float (&acc_b)[MT][NT][4] = acc_ob;
      float acc_c[MT][NT][4];
      warp_mma_split<MT, NT, kC, false, true, L::kSwz>(acc, acc_b, acc_c, sAqk, LDT, t0, sUh, LDV, n0, lane, nullptr,
                                                    sUl);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[mt][nt][e] += acc_b[mt][nt][e];
      const int64_t tok0 = p.tab[3 * c], bb = p.tab[3 * c + 1];
      const int rows = int(p.tab[3 * c + 2]);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) {
          const int t = t0 + 16 * mt + gq + 8 * rr;
          if (t < rows) {
            const int64_t ob = bb * p.s_o[0] + (tok0 + t) * p.s_o[1] + h * p.s_o[2] + v0;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
              const int v = n0 + 8 * nt + 2 * tq;
              store_2(p.o, p.dt_o, ob + v, acc[mt][nt][2 * rr], acc[mt][nt][2 * rr + 1]);
            }
          }
        }
    }

    // S^T <- S^T diag(exp(GC)) + U^T KdT^T   (VT x K, k = 64; U hi + lo; fp32 accumulators are the state)
#pragma unroll
    for (int mt = 0; mt < MT7; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT7; ++nt)
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) {
          const int kk = n07 + 8 * nt + 2 * tq;
          st[mt][nt][2 * rr] *= sDecay[kk];
          st[mt][nt][2 * rr + 1] *= sDecay[kk + 1];
        }
    warp_mma<MT7, NT7, kC, true, true, false, L::kSwz>(st, sUh, LDV, m0, sKdt, LDT, n07, lane, sUl);
    __syncthreads();  // every warp has read S^T hi / lo, Qg, A_qk (products above) before they are overwritten
    if (c + 1 < cend && outs) walk_prefetch_out<D, VT, NTHR>(p, smem, cid + p.H, tid);
    cp_async_commit();
    store_split();
    // the next iteration's barrier orders these writes before any read
  }
  cp_async_wait<0>();

  if ((dst == kDstUser && p.s1) || dst == kDstScratch) {
#pragma unroll
    for (int mt = 0; mt < MT7; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT7; ++nt)
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) {
          const int v = m0 + 16 * mt + gq + 8 * rr, kk = n07 + 8 * nt + 2 * tq;
          if (dst == kDstScratch) {
            *reinterpret_cast<float2*>(dst_p + size_t(v0 + v) * D + kk) =
                make_float2(st[mt][nt][2 * rr], st[mt][nt][2 * rr + 1]);
          } else {
#pragma unroll
            for (int cc = 0; cc < 2; ++cc)
              p.s1[user_state_index<D>(p, n, h, v0 + v, kk + cc)] = st[mt][nt][2 * rr + cc];
          }
        }
  }
}

}  // namespace kimi::cuda::kda_chunk
