// src/cuda/kda/recurrent.cuh: KDA token-by-token recurrence (SPEC 5, kimi/ops/kda.h), fp32 compute.
//
// Per (sequence n, head h), state S in R^{K x V} (fp32), per token t (after the optional fused gate,
// beta sigmoid and L2 norm of q and k over K, x / sqrt(sum x^2 + 1e-6); q scaled by `scale`):
//   S <- diag(exp(g)) S ;  e = v - S^T k ;  S <- S + beta k e^T ;  o = S^T q
// computed as (same math, one reduction pass over K per token instead of two):
//   Sd = diag(exp(g)) S
//   kS = rk * (k_raw^T Sd),  qS = rq * (q_raw^T Sd)         rk, rq: the L2 norms' and the scale's factors
//   e  = v - kS ;  o = qS + beta * (q.k) * e                 (q.k of the normalized, scaled vectors)
//   S  = Sd + (beta * rk * k_raw) e^T
// since S_new^T q = Sd^T q + beta e (k.q).
//
// Layouts: q, k, g [B, T, H, K]; v, o [B, T, H, V]; beta [B, T, H]: last dim stride 1, other strides
// arbitrary (elements). Packed variable-length: B = 1, token range [cu[n], cu[n+1]) (cu on the device,
// int64). States fp32 [N, H, K, V] (kv) or [N, H, V, K] (vk), last dim stride 1, other strides
// arbitrary; initial optional (zeros), final optional and may alias initial (every thread reads its
// own state elements at the start and writes the same elements at the end; no thread touches another's).
// Sequence n's state is row n, or row slots[n] of a state pool (distinct rows, device int64 [N]).
//
// Grid: 1-D, CTA = (V-tile, head, sequence), V-tile fastest. 128 threads. The CTA's K x BV state tile
// lives in registers for the whole token loop; 16-byte state accesses where the layout allows
// (`vec` flags), guarded scalar accesses otherwise (any K, V in [1, 256]).
//  kv kernel (row-major K x V): thread = (column group cg of 4 consecutive V columns, row group rg);
//    CG column groups (BV = 4*CG), RG = 128/CG row groups, rows rg + RG*r (r < NR). A warp reads
//    32/CG consecutive rows x 16*CG contiguous bytes. Reductions over K: shuffles over the row
//    groups of a warp, then the 4 warps' partials through shared memory (2 barriers per token).
//  vk kernel (row-major V x K): thread = (K group kg of 4 consecutive K, column group vg);
//    KG K groups per column (KG <= 32 lanes of one warp, K slots 4*kg + 4*KG*c, c < KC), VG = 128/KG
//    column groups, columns vg + VG*n (n < NV), BV = VG*NV. A warp reads 32/KG consecutive rows of
//    K*4 contiguous bytes. Reductions over K: shuffles only (1 barrier per token).
// The per-token q, k, exp(g), v, beta go through shared memory, double-buffered by token parity so
// that the staging of token t+1 cannot overwrite what a slower thread still reads for token t.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/elementwise.cuh"
#include "cuda/kda/kda_device.cuh"

namespace kimi::cuda::kda_detail {

inline constexpr int kThreads = 128;
inline constexpr int kWarps = kThreads / 32;

struct Params {
  // Per-token inputs (dtype codes ElemType, src/cuda/elementwise.cuh) and their [b, t, h] strides in elements.
  const void* q; const void* k; const void* v; const void* g; const void* beta;
  void* o;
  int tq, tk, tv, tg, tbeta, to;
  int64_t q_b, q_t, q_h, k_b, k_t, k_h, v_b, v_t, v_h, g_b, g_t, g_h;
  int64_t beta_b, beta_t, beta_h, o_b, o_t, o_h;
  // Fused gate.
  int gate;  // GateCode
  const float* A_log; int64_t A_s;           // A_log[h * A_s]
  const float* dt_bias; int64_t dtb_h, dtb_k;  // dt_bias[h * dtb_h + i * dtb_k]
  float lower_bound;
  int beta_sigmoid, l2norm;
  float scale;
  // States: [n, h, row] strides (the last dim has stride 1).
  const float* s_in; int64_t si_n, si_h, si_r; int si_vec;
  float* s_out; int64_t so_n, so_h, so_r; int so_vec;
  const int64_t* slots;  // device [N]: sequence n's state row (state pools, KdaArgs::state_slots), or null: n
  // Sequences.
  const int64_t* cu;  // device [N+1] or null
  int64_t T;          // tokens per sequence without cu
  int H, K, V, n_tiles;
};

__device__ __forceinline__ int64_t state_row(const Params& p, int64_t n) { return p.slots != nullptr ? p.slots[n] : n; }


// exp of the (optionally fused) gate of element i of head h, from the raw input gi.
__device__ __forceinline__ float gate_exp(const Params& p, int h, int i, float gi, float expA) {
  const float dtb = p.gate != gate_none ? p.dt_bias[h * p.dtb_h + i * p.dtb_k] : 0.f;
  return expf(gate_log(p.gate, gi, dtb, expA, p.lower_bound));
}

// Shared per-token staging, double-buffered. KMAX >= K rows (zero-filled beyond K: q = k = 0,
// exp(g) = 1, so the state rows beyond K stay 0), BV values of v (0 beyond V).
template <int KMAX, int BV>
struct Stage {
  static_assert(KMAX % 4 == 0, "rows of q, k, a are read as float4");
  alignas(16) float q[2][KMAX];
  alignas(16) float k[2][KMAX];
  alignas(16) float a[2][KMAX];
  float v[2][BV];
  float beta[2];
  float sums[2][kWarps][3];  // per-warp partial sum q.q, k.k, q.k
};

struct SeqInfo {
  int n, h, tile;
  int64_t bos, len, b;
};

__device__ __forceinline__ SeqInfo seq_info(const Params& p) {
  SeqInfo s;
  const int64_t cta = blockIdx.x;
  s.tile = int(cta % p.n_tiles);
  const int64_t nh = cta / p.n_tiles;
  s.h = int(nh % p.H);
  s.n = int(nh / p.H);
  if (p.cu != nullptr) {
    s.b = 0;
    s.bos = p.cu[s.n];
    s.len = p.cu[s.n + 1] - s.bos;
  } else {
    s.b = s.n;
    s.bos = 0;
    s.len = p.T;
  }
  return s;
}

// Stage token (b, t) into buffer `buf`; columns [j0, j0 + BV) of v. Ends with __syncthreads().
template <int KMAX, int BV>
__device__ __forceinline__ void stage_token(const Params& p, Stage<KMAX, BV>& sm, int buf, int64_t b, int64_t t,
                                            int h, int j0, float expA) {
  const int tid = threadIdx.x;
  const int64_t oq = b * p.q_b + t * p.q_t + h * p.q_h;
  const int64_t ok = b * p.k_b + t * p.k_t + h * p.k_h;
  const int64_t og = b * p.g_b + t * p.g_t + h * p.g_h;
  float sqq = 0.f, skk = 0.f, sqk = 0.f;
  for (int i = tid; i < KMAX; i += kThreads) {
    float qi = 0.f, ki = 0.f, ai = 1.f;
    if (i < p.K) {
      qi = load_f32(p.q, oq + i, p.tq);
      ki = load_f32(p.k, ok + i, p.tk);
      ai = gate_exp(p, h, i, load_f32(p.g, og + i, p.tg), expA);
    }
    sm.q[buf][i] = qi;
    sm.k[buf][i] = ki;
    sm.a[buf][i] = ai;
    sqq += qi * qi;
    skk += ki * ki;
    sqk += qi * ki;
  }
  for (int j = tid; j < BV; j += kThreads) {
    const int jj = j0 + j;
    sm.v[buf][j] = jj < p.V ? load_f32(p.v, b * p.v_b + t * p.v_t + h * p.v_h + jj, p.tv) : 0.f;
  }
  if (tid == 0) {
    float bt = load_f32(p.beta, b * p.beta_b + t * p.beta_t + h * p.beta_h, p.tbeta);
    if (p.beta_sigmoid) bt = beta_sigmoid(bt);
    sm.beta[buf] = bt;
  }
  warp_token_sums(sqq, skk, sqk, tid % 32, sm.sums[buf][tid / 32]);
  __syncthreads();
}

// The per-token scalars after staging (kda_device.cuh's token_factors of the staged sums).
template <int KMAX, int BV>
__device__ __forceinline__ TokenScalars token_scalars(const Params& p, const Stage<KMAX, BV>& sm, int buf) {
  float sqq, skk, sqk;
  token_sums(sm.sums[buf], sqq, skk, sqk);
  return token_factors(sqq, skk, sqk, p.scale, p.l2norm, sm.beta[buf]);
}

// ---------------------------------------------------------------------------------------------
// kv layout: S[row i][col j] at i * s_r + j.

// The kv kernels, after the barrier that completes red (per warp and column group: k^T Sd (4), q^T Sd (4)): for the
// thread's 4 columns, e = v - rk k^T Sd (v4: v of the first) and q^T Sd, the warps' partials summed in warp order.
template <int CG>
__device__ __forceinline__ void kv_column_sums(const float (&red)[kWarps][CG][8], int cg, const float* v4, float rk,
                                               float (&ev)[4], float (&qs)[4]) {
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    float ks = 0.f;
    qs[e] = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      ks += red[w][cg][e];
      qs[e] += red[w][cg][4 + e];
    }
    ev[e] = v4[e] - rk * ks;
  }
}

template <int CG, int NR>
__global__ void __launch_bounds__(kThreads) kda_recurrent_kv_kernel(const Params p) {
  constexpr int RG = kThreads / CG;  // row groups
  constexpr int BV = 4 * CG;         // columns per CTA
  constexpr int KMAX = RG * NR;
  static_assert(32 % CG == 0 && kThreads % CG == 0, "column groups must divide a warp");
  __shared__ Stage<KMAX, BV> sm;
  __shared__ float red[2][kWarps][CG][8];  // per warp, per column group: k^T Sd (4), q^T Sd (4)

  const SeqInfo si = seq_info(p);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int cg = tid % CG, rg = tid / CG;
  const int j0 = si.tile * BV;          // first column of the CTA
  const int jc = j0 + 4 * cg;           // first of the thread's 4 columns
  const int vcols = kv_valid_cols(jc, p.V);  // valid columns of the thread

  float4 S[NR];
  if (p.s_in != nullptr) {
    const float* at = p.s_in + state_row(p, si.n) * p.si_n + si.h * p.si_h + int64_t(rg) * p.si_r + jc;
    kv_load<NR, RG>(S, at, p.si_r, p.V, p.K, rg, jc, p.si_vec);
  } else {
#pragma unroll
    for (int r = 0; r < NR; ++r) S[r] = make_float4(0.f, 0.f, 0.f, 0.f);
  }

  const float expA = p.gate != gate_none ? expf(p.A_log[si.h * p.A_s]) : 0.f;
  for (int64_t t = 0; t < si.len; ++t) {
    const int buf = int(t & 1);
    stage_token(p, sm, buf, si.b, si.bos + t, si.h, j0, expA);
    const TokenScalars ts = token_scalars(p, sm, buf);

    // Decay, and the partial reductions over this thread's rows and the warp's row groups.
    float pk[4], pq[4];
    kv_decay_dots<NR, RG, CG>(S, sm.a[buf], sm.k[buf], sm.q[buf], rg, pk, pq);
    if (lane < CG) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        red[buf][warp][cg][e] = pk[e];
        red[buf][warp][cg][4 + e] = pq[e];
      }
    }
    __syncthreads();

    float ev[4], qs[4];
    kv_column_sums<CG>(red[buf], cg, &sm.v[buf][4 * cg], ts.rk, ev, qs);
    if (rg == 0) {  // o = qS + beta (q.k) e, written by the first row group
      const int64_t oo = si.b * p.o_b + (si.bos + t) * p.o_t + si.h * p.o_h + jc;
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (e < vcols) store_f32(p.o, oo + e, p.to, ts.rq * qs[e] + ts.beta * ts.qk * ev[e]);
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) ev[e] *= ts.beta * ts.rk;  // now beta * rk * e
    kv_add_k<NR, RG>(S, sm.k[buf], rg, make_float4(ev[0], ev[1], ev[2], ev[3]));
  }

  if (p.s_out != nullptr) {
    float* at = p.s_out + state_row(p, si.n) * p.so_n + si.h * p.so_h + int64_t(rg) * p.so_r + jc;
    kv_store<NR, RG>(S, at, p.so_r, p.V, p.K, rg, jc, p.so_vec);
  }
}

// ---------------------------------------------------------------------------------------------
// vk layout: S[row i][col j] (K x V) stored transposed, at j * s_r + i.
template <int KG, int KC, int NV>
__global__ void __launch_bounds__(kThreads) kda_recurrent_vk_kernel(const Params p) {
  constexpr int VG = kThreads / KG;  // column groups
  constexpr int BV = VG * NV;        // columns per CTA
  constexpr int KMAX = 4 * KG * KC;
  static_assert(32 % KG == 0, "a column's K groups must lie in one warp");
  __shared__ Stage<KMAX, BV> sm;

  const SeqInfo si = seq_info(p);
  const int tid = threadIdx.x;
  const int kg = tid % KG, vg = tid / KG;
  const int j0 = si.tile * BV;

  const int jt = j0 + vg;  // the thread's first column; columns jt + VG * m, m < NV
  float4 S[NV][KC];
  if (p.s_in != nullptr) {
    const float* at = p.s_in + state_row(p, si.n) * p.si_n + si.h * p.si_h + int64_t(jt) * p.si_r + 4 * kg;
    vk_load<KG, KC, NV, VG>(S, at, p.si_r, p.K, p.V, jt, kg, p.si_vec);
  } else {
#pragma unroll
    for (int n = 0; n < NV; ++n)
#pragma unroll
      for (int c = 0; c < KC; ++c) S[n][c] = make_float4(0.f, 0.f, 0.f, 0.f);
  }

  const float expA = p.gate != gate_none ? expf(p.A_log[si.h * p.A_s]) : 0.f;
  for (int64_t t = 0; t < si.len; ++t) {
    const int buf = int(t & 1);
    stage_token(p, sm, buf, si.b, si.bos + t, si.h, j0, expA);
    const TokenScalars ts = token_scalars(p, sm, buf);

    // This thread's K slots, 16-byte shared loads (KMAX is a multiple of 4, rows 16-byte aligned).
    float a[KC][4], kk[KC][4], qq[KC][4];
    vk_token_slots<KC, KG>(sm.a[buf], sm.k[buf], sm.q[buf], kg, a, kk, qq);
#pragma unroll
    for (int n = 0; n < NV; ++n) {
      float pk, pq;
      vk_decay_dots<KC, KG>(S[n], a, kk, qq, pk, pq);
      const int jl = vg + VG * n;  // local column
      const float ev = sm.v[buf][jl] - ts.rk * pk;
      const float ov = ts.rq * pq + ts.beta * ts.qk * ev;
      const float be = ts.beta * ts.rk * ev;
      vk_add_k<KC>(S[n], kk, be);
      if (kg == 0 && j0 + jl < p.V)
        store_f32(p.o, si.b * p.o_b + (si.bos + t) * p.o_t + si.h * p.o_h + j0 + jl, p.to, ov);
    }
  }

  if (p.s_out != nullptr) {
    float* at = p.s_out + state_row(p, si.n) * p.so_n + si.h * p.so_h + int64_t(jt) * p.so_r + 4 * kg;
    vk_store<KG, KC, NV, VG>(S, at, p.so_r, p.K, p.V, jt, kg, p.so_vec);
  }
}

// ---------------------------------------------------------------------------------------------
// Decode specializations: T == 1, no cu_seqlens (sequence n = batch row b, token t = 0), where the launcher does not
// take recurrent_stream.cuh's streaming kernels (recurrent.cu use_stream: whole-head state blocks through shared
// memory, for grids of many heads). Same tiles,
// thread mappings and math as the kernels above, but the CTA is one latency-bound pass over its
// 16 KB (K = V = 128) state tile, so every thread issues all of its 16-byte state loads first
// (unrolled, independent, ld.global.cs; branch-free on full tiles), and all token work overlaps them;
// no double buffers; 16-byte st.global.cs stores. The token goes through shared memory (stage_token,
// one buffer); its barrier is taken while the state loads are in flight, and each thread reads its q, k,
// exp(g) back only when the state is needed, so it keeps few registers: at K = V = 128, kv 79 registers
// (6 CTAs per SM, 96 KB of state loads in flight per SM), vk 72 (7 CTAs, 112 KB). kv: 2 barriers, vk: 1.
// (Measured on the H200, 2026-11-29: a register-only variant with fewer barriers but 92-96 registers ran
// 1.1-1.9x slower, and an L2::256B prefetch hint on the kv loads gained < 1%; both were removed.)
// Aliasing: as above, every thread reads its own state elements first and writes the same ones last.
// kv, staged variant (see above).
template <int CG, int NR>
__global__ void __launch_bounds__(kThreads, NR <= 4 ? 8 : NR <= 8 ? 6 : 4) kda_decode_kv_staged_kernel(const Params p) {
  constexpr int RG = kThreads / CG;  // row groups
  constexpr int BV = 4 * CG;         // columns per CTA
  constexpr int KMAX = RG * NR;
  static_assert(32 % CG == 0 && kThreads % CG == 0, "column groups must divide a warp");
  __shared__ Stage<KMAX, BV> sm;
  __shared__ float red[kWarps][CG][8];  // per warp, per column group: k^T Sd (4), q^T Sd (4)

  const int64_t cta = blockIdx.x;
  const int tile = int(cta % p.n_tiles);
  const int64_t nh = cta / p.n_tiles;
  const int h = int(nh % p.H);
  const int64_t n = nh / p.H;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int cg = tid % CG, rg = tid / CG;
  const int j0 = tile * BV;
  const int jc = j0 + 4 * cg;          // first of the thread's 4 columns
  const int vcols = kv_valid_cols(jc, p.V);  // valid columns of the thread
  const int K = p.K;

  float4 S[NR];
  if (p.s_in != nullptr) {
    const float* at = p.s_in + state_row(p, n) * p.si_n + h * p.si_h + int64_t(rg) * p.si_r + jc;
    kv_load<NR, RG>(S, at, p.si_r, p.V, K, rg, jc, p.si_vec);
  } else {
#pragma unroll
    for (int r = 0; r < NR; ++r) S[r] = make_float4(0.f, 0.f, 0.f, 0.f);
  }

  const float expA = p.gate != gate_none ? expf(p.A_log[h * p.A_s]) : 0.f;
  stage_token(p, sm, 0, n, 0, h, j0, expA);
  const TokenScalars ts = token_scalars(p, sm, 0);

  float pk[4], pq[4];
  kv_decay_dots<NR, RG, CG>(S, sm.a[0], sm.k[0], sm.q[0], rg, pk, pq);
  if (lane < CG) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      red[warp][cg][e] = pk[e];
      red[warp][cg][4 + e] = pq[e];
    }
  }
  __syncthreads();

  float ev[4], qs[4];
  kv_column_sums<CG>(red, cg, &sm.v[0][4 * cg], ts.rk, ev, qs);
  if (rg == 0) {  // o = qS + beta (q.k) e, written by the first row group
    const int64_t oo = n * p.o_b + h * p.o_h + jc;
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (e < vcols) store_f32(p.o, oo + e, p.to, ts.rq * qs[e] + ts.beta * ts.qk * ev[e]);
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) ev[e] *= ts.beta * ts.rk;  // now beta * rk * e
  kv_add_k<NR, RG>(S, sm.k[0], rg, make_float4(ev[0], ev[1], ev[2], ev[3]));

  if (p.s_out != nullptr) {
    float* at = p.s_out + state_row(p, n) * p.so_n + h * p.so_h + int64_t(rg) * p.so_r + jc;
    kv_store<NR, RG>(S, at, p.so_r, p.V, K, rg, jc, p.so_vec);
  }
}

// vk, staged variant (see above).
template <int KG, int KC, int NV>
__global__ void __launch_bounds__(kThreads, KC * NV <= 4 ? 8 : KC == 1 && NV <= 8 ? 7 : KC * NV <= 8 ? 6 : 3)
    kda_decode_vk_staged_kernel(const Params p) {
  constexpr int VG = kThreads / KG;  // column groups
  constexpr int BV = VG * NV;        // columns per CTA
  constexpr int KMAX = 4 * KG * KC;
  static_assert(32 % KG == 0, "a column's K groups must lie in one warp");
  __shared__ Stage<KMAX, BV> sm;

  const int64_t cta = blockIdx.x;
  const int tile = int(cta % p.n_tiles);
  const int64_t nh = cta / p.n_tiles;
  const int h = int(nh % p.H);
  const int64_t n = nh / p.H;
  const int tid = threadIdx.x;
  const int kg = tid % KG, vg = tid / KG;
  const int j0 = tile * BV;
  const int jt = j0 + vg;  // the thread's first column; columns jt + VG * m, m < NV
  const int K = p.K, V = p.V;

  float4 S[NV][KC];
  if (p.s_in != nullptr) {
    const float* base = p.s_in + state_row(p, n) * p.si_n + h * p.si_h + int64_t(jt) * p.si_r + 4 * kg;
    vk_load<KG, KC, NV, VG>(S, base, p.si_r, K, V, jt, kg, p.si_vec);
  } else {
#pragma unroll
    for (int m = 0; m < NV; ++m)
#pragma unroll
      for (int c = 0; c < KC; ++c) S[m][c] = make_float4(0.f, 0.f, 0.f, 0.f);
  }

  const float expA = p.gate != gate_none ? expf(p.A_log[h * p.A_s]) : 0.f;
  stage_token(p, sm, 0, n, 0, h, j0, expA);
  const TokenScalars ts = token_scalars(p, sm, 0);

  float a[KC][4], kk[KC][4], qq[KC][4];
  vk_token_slots<KC, KG>(sm.a[0], sm.k[0], sm.q[0], kg, a, kk, qq);
#pragma unroll
  for (int m = 0; m < NV; ++m) {
    float pk, pq;
    vk_decay_dots<KC, KG>(S[m], a, kk, qq, pk, pq);
    const int jl = vg + VG * m;  // local column
    const float ev = sm.v[0][jl] - ts.rk * pk;
    const float be = ts.beta * ts.rk * ev;
    vk_add_k<KC>(S[m], kk, be);
    if (kg == 0 && j0 + jl < V)
      store_f32(p.o, n * p.o_b + h * p.o_h + j0 + jl, p.to, ts.rq * pq + ts.beta * ts.qk * ev);
  }

  if (p.s_out != nullptr) {
    float* base = p.s_out + state_row(p, n) * p.so_n + h * p.so_h + int64_t(jt) * p.so_r + 4 * kg;
    vk_store<KG, KC, NV, VG>(S, base, p.so_r, K, V, jt, kg, p.so_vec);
  }
}

}  // namespace kimi::cuda::kda_detail
