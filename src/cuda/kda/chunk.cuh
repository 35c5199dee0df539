// src/cuda/kda/chunk.cuh: chunkwise KDA forward (prefill) on tensor cores, SPEC 5 / 5.1, in two passes: everything
// that does not depend on the state is computed for all chunks in parallel (the prep), and one sequential walk per
// (sequence, head, V tile of 64) does the state-dependent products, the output included. This header has the
// parameters, the scratch and walk-unit layouts and the device helpers both passes share; prep.cuh and walk_rs.cuh
// have the kernels, seqpar.cuh the segment scan, chunk.cu the launcher.
//
// Math per chunk of C = 64 rows t (g the log decay per key channel k, G its in-chunk cumulative sum, GC = G of the
// last row, S the state [K][V], beta the write strengths):
//   Qg = q exp(G), Kg = k exp(G), KdT[k][t] = k_t exp(GC - G_t), decay = exp(GC)
//   A_qk[t][s] = sum_k q_tk exp(G_tk - G_sk) k_sk (s <= t),  A_kk[t][s] = beta_t sum_k k_tk exp(G_tk - G_sk) k_sk
//   (s < t),  T = (I + A_kk)^-1,  Tb = T diag(beta),  Wn = -Tb Kg,  U0 = Tb V: the pseudo-values U = U0 + Wn S
//   O = Qg S + A_qk U,   S <- diag(decay) S + KdT U
//
// Chunks: C = 64 rows; chunks never straddle sequences. The launcher builds a table of all chunks (tab[3 c] = first
// token, tab[3 c + 1] = batch row, tab[3 c + 2] = rows) and of the first chunk of each sequence (seq0[n],
// seq0[N] = number of chunks). Rows beyond a sequence end are zero (q = k = v = 0, g = 0, beta = 0): they neither
// decay nor update the state, and their outputs are not written.
//
// Kernel 1, kda_chunk_prep<D, kDiagMma> (prep.cuh; grid chunks x H, 512 threads, two CTAs per SM, one chunk-head per
//   CTA): A_qk, Qg, KdT, decay, and T by blocked forward substitution (fp32), Tb = T diag(beta); stores Kg and Tb
//   (the walk forms Wn and U0 itself) and v as bf16 unless the walk reads v (Params::v_in_walk).
// Kernel 2, kda_chunk_walk_rs<D> (walk_rs.cuh; grid N x H x D / 64, 256 threads): the fp32 state tile S^T [64 v][D]
//   in the accumulators of its update, fed to the next chunk's products as bf16 hi + lo register fragments; one
//   warpgroup runs the per-chunk chain, the other loads the operands, forms Wn = -Tb Kg and stores O.
// Segments (sequence parallelism; few heads x long sequences, where the plain walk's N x H x D / 64 CTAs leave most
//   SMs idle). Per chunk the state map is affine, S' = A_c S + B_c with A_c = diag(decay) + KdT Wn (K x K),
//   B_c = KdT U0, the same A_c for every V column. The launcher splits each sequence into P segments of len_seg
//   whole chunks (a segment table: first chunk, end chunk, sequence, index j, count P; built on the device for
//   graph capture) and runs the walk kernel three times over walk units (WalkUnit, walk_unit: one CTA each):
//   phase 1 (kWalkMaps, grid segments x H x 2 D / 64): segment 0 is an ordinary walk from the initial state with
//     outputs, ending in scratch (seg_start of segment 1; in s1 when P = 1); a middle segment j walks its V value
//     columns from S = 0 (C_j, to seg_start of segment j + 1) and, in D / 64 more CTAs, identity columns from
//     S = I with U0 = 0 (M_j, to seg_map: row i = M_j e_i); no outputs, so no Qg / A_qk.
//   phase 2 (kda_seg_scan, seqpar.cuh): start_{j+1} = M_j start_j + C_j in fp32, sequentially over j.
//   phase 3 (kWalkFinish, grid segments x H x D / 64): segments j >= 1 walk from their start in scratch (never from
//     s0: s1 may alias it), with outputs; the last one writes s1.
//   Scratch: two [D][D] fp32 blocks per segment-head (rows v, columns k). The work is ~3x the plain walk's (maps of
//   K + V columns, then the V columns again), so it pays only while SMs would idle: the launcher's cost model
//   (src/cuda/kda/segment_plan.h) prices both and picks len_seg. Measured (H200, bf16, 1 x 65536 H8): 2.650 ms
//   plain, 1.196 ms with 9 segments (docs/gpu/2026-11-30-h200-run43.txt).
//
// Precision: every product bf16 x bf16 -> fp32 on tensor cores; the state, U and Wn enter the long products as bf16
// hi + lo pairs (hi = bf16(x), lo = bf16(x - hi): ~16 bits), where the walk's accuracy needs it (walk_rs.cuh
// "Precision"). Measured on the H200 vs an fp64 recurrence (bf16 inputs and output, both gate forms, T up to 65536):
// relative RMS error ~3e-3 on o, ~2e-3 on the final state against a bar of 5e-3 (single-bf16 S / U gave 4.7e-3).
// f32 inputs get the same ~3e-3: NOT an fp32-accurate path.
//
// Scratch (one cudaMallocAsync per call; per chunk-head, D = K = V): Qg bf16 [64][D], A_qk bf16 [64][64], KdT bf16
// [D][64], decay f32 [D], Kg bf16 [64][D], Tb bf16 [64][64], and v bf16 [64][D] unless Params::v_in_walk. The bf16
// tiles are laid out exactly as the walk holds them in shared memory (128B-swizzled, atom-major: wgmma.cuh,
// scr_tile_off), so that one bulk copy moves each. D = 128: 82432 / 66048 B per chunk-head (1288 / 1032 B per
// token-head) with v in the scratch / read from v; D = 64: 49408 / 41216 B.
//
// Shared memory: prep 113936 / 79888 B at D = 128 / 64 (two CTAs per SM); walk RsSmem<D>::TOTAL (191552 B at
// D = 128). Measured split (H200, 1 x 16384 H64, ncu): prep ~0.9 ms, walk ~0.5 ms of ~1.4 ms
// (docs/gpu/2026-11-30-h200-run64.txt); what bounds each and the alternatives measured: docs/ops/kda.md.
#pragma once

#include <cuda.h>  // CUtensorMap
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/bulk_copy.cuh"
#include "cuda/wgmma.cuh"


namespace kimi::cuda::kda_chunk {

using bf16 = __nv_bfloat16;

constexpr int kC = 64;  // chunk rows

// Storage dtypes (== int(kimi::DType::...), checked by static_assert in chunk.cu).
enum : int { kDtF32 = 0, kDtBf16 = 1, kDtF16 = 2 };
enum : int { kGateNone = 0, kGateBounded = 1, kGateSoftplus = 2 };

// Scratch arrays, each indexed by chunk-head cid = chunk * H + head (see the header comment).
struct Scratch {
  bf16* qg;      // [cid][64][D]
  bf16* aqk;     // [cid][64][64] (upper triangle zero)
  bf16* kdt;     // [cid][D][64]
  float* decay;  // [cid][D]
  bf16* kg;      // [cid][64][D]  Kg = k exp(G)
  bf16* tb;      // [cid][64][64] Tb = T diag(beta) (blocks above the diagonal zero)
  bf16* vb;      // [cid][64][D]  v as bf16 (rows beyond the sequence end zero); null with Params::v_in_walk
};

// Bytes of each scratch array per chunk-head, in the order of Scratch (all multiples of 256); total(v_in_walk): all
// of them (without vb when the walk reads v).
template <int D>
struct ScratchBytes {
  static constexpr size_t qg = size_t(kC) * D * 2, aqk = size_t(kC) * kC * 2, kdt = size_t(D) * kC * 2,
                          decay = size_t(D) * 4, kg = size_t(kC) * D * 2, tb = size_t(kC) * kC * 2, vb = size_t(kC) * D * 2;
  static constexpr size_t total(bool v_in_walk) { return qg + aqk + kdt + decay + kg + tb + (v_in_walk ? 0 : vb); }
};
static_assert(ScratchBytes<128>::total(false) == 82432 && ScratchBytes<64>::total(false) == 49408 &&
                  ScratchBytes<128>::total(true) == 66048 && ScratchBytes<64>::total(true) == 41216,
              "documented sizes");

// Element offset of (row r, column c) in a scratch bf16 tile of R rows (Qg, Kg, A_qk, Tb, v: R = 64; KdT:
// R = D): the walk's shared-memory layout (header: "Scratch").
template <int R>
__device__ __forceinline__ int scr_tile_off(int r, int c) {
  return wgmma::sw128_off<R>(r, c);
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
  const int64_t* state_rows;  // device [N]: the state row (pool slot) of sequence n in s0 / s1, or null: row n
  int vk;           // state layout [N, H, V, K]
  int rows_bf16;    // q, k, v, g all bf16 with 8-byte aligned row pieces: the prep's fast row loads (launcher)
  int rows_bulk;    // ... and 16-byte aligned rows: the prep's rows by tensor-map copies (launcher)
  // rows_bulk: q, k, v, g (in that order) as 4-d bf16 tensors, innermost first {D channels, H, T, B} at their
  // strides, box {D + 8, 1, 64, 1}: one chunk-head's 64 rows land in the prep's padded [64][D + 8] rows in one copy
  // (the 8 pad columns lie beyond the D channels: zero-filled), rows past T as zeros (chunk.cu encode_row_tiles)
  CUtensorMap rows_map[4];
  int v_in_walk;    // (rows_bulk) the walk reads its V tiles from v: no vb scratch, and the
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

// The state of (sequence n, head h) in s0 / s1 ([rows][H][D][D]): row state_rows[n] of the pools, or row n, at
// user_state_base; element (column j, key channel kk) at user_state_base + user_state_offset (rows j (vk) or kk (kv)).
template <int D>
__device__ __forceinline__ int64_t user_state_base(const Params& p, int64_t n, int h) {
  const int64_t row = p.state_rows ? p.state_rows[n] : n;
  return (row * p.H + h) * int64_t(D) * D;
}
template <int D>
__device__ __forceinline__ int user_state_offset(const Params& p, int j, int kk) {
  return p.vk ? j * D + kk : kk * D + j;
}
// Where a walk CTA's state starts (WalkUnit::src), as one strided read or none: element (column j, key channel kk) at
// m[j sj + kk skk] (s0 in its layout, or the segment start in the scratch, rows j), else the identity columns or zero.
// Built once per CTA: the start loads are one predicated batch, no per-element branch on the source (walk_rs.cuh
// ~1000 SASS instructions shorter than with the per-element rule; docs/gpu/2026-11-30-h200-run52.txt).
struct StartState {
  const float* m;  // null: zero or identity
  int sj, skk;
  bool ident;
  template <int D>
  __device__ __forceinline__ static StartState of(const Params& p, const WalkUnit& u) {
    if (u.src == kSrcUser && p.s0)
      return {p.s0 + user_state_base<D>(p, u.n, u.h), p.vk ? D : 1, p.vk ? 1 : D, false};
    if (u.src == kSrcScratch) return {u.src_p, D, 1, false};
    return {nullptr, 0, 0, u.src == kSrcIdentity};
  }
  __device__ __forceinline__ float at(int j, int kk) const {
    const float x = m ? __ldcg(m + j * sj + kk * skk) : 0.f;  // read once: L2 only
    return ident && j == kk ? 1.f : x;
  }
};

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

// ---------------------------------------------------------------------------------------------------------
// copies

// 16 bytes global -> shared by cp.async (L2 only); where !valid, nothing is read and 16 zero bytes are written
// (gmem_src must still be a valid address form).
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

}  // namespace kimi::cuda::kda_chunk
