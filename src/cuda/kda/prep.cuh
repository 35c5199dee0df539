// src/cuda/kda/prep.cuh: kernel 1 of the chunkwise KDA prefill (chunk.cuh has the two-pass design, the
// scratch layout it fills and the walk that reads it): every state-independent product of one chunk-head.
//
// kda_chunk_prep<D, kDiagMma> (grid: chunks x H, 512 threads = 16 warps, one chunk-head per CTA, TWO CTAs per
// SM: 113936 B of shared memory at D = 128, registers capped at 64 by __launch_bounds__(512, 2)). Math (SPEC 5.1,
// rows i, j of the chunk, channels c, G = inclusive cumsum of g over the chunk rows, GC = G[63]):
//   A_qk[i][j] = sum_c q_ic k_jc exp(G_ic - G_jc)            (j <= i; bf16 -> scratch)
//   A_kk[i][j] = beta_i sum_c k_ic k_jc exp(G_ic - G_jc)     (j <  i; fp32, shared memory only)
//   T = (I + A_kk)^-1, Tb = T diag(beta) (bf16); Qg = q exp(G), Kg = k exp(G), KdT[c][t] = k_tc exp(GC - G_tc)
//   decay = exp(GC); the other scratch form also Wn = -Tb Kg (bf16 hi + lo), U0 = Tb V (fp32)
// All exponentials are ex2 of G kept in log2 units (G2 = G log2 e): one MUFU op each, no multiply.
// Phases (barriers between them):
//   L  rows -> shared memory. Warp w owns the 4 contiguous rows 4w .. 4w + 3, lane the channels EPL lane ..
//      + EPL (EPL = D / 32). Three load paths, the first that the inputs allow (launcher), the same bits:
//      bulk (Params::rows_bulk: q, k, v, g bf16, 16-byte aligned rows): thread 0 copies each tensor's 64 rows
//        by one tensor-map copy into the padded shared rows (raw g into the G2 region), one mbarrier
//        (prep_issue_row_tiles); each warp then reads its rows back for the per-row work (prep_bulk_rows);
//      vector (Params::rows_bf16, 8-byte aligned row pieces): one vector load per row and tensor per lane, all
//        4 rows in flight (prep_load_rows);
//      generic: any dtype / alignment (load_raw, raw_to_f32), two rows at a time.
//      The gate form is a template parameter of each (uniform branch).
//      q, k stored RAW as bf16 with per-row fp32 multipliers mq = scale / ||q|| (or scale), mk = 1 / ||k|| (or
//      1), applied when an operand or a product is formed (q, k rounded once); v as bf16 rows; beta (sigmoid);
//      gate -> g2 = g log2 e in registers, cumsum of the warp's rows in registers, warp totals to shared
//      memory, then each lane adds the totals of the warps before it: G2 [64][D] fp32. decay -> scratch.
//      Staged (Params::v_in_walk: v never enters shared memory): phase A's row operands q~ = q exp(G - R_a), k~ =
//      k exp(G - R_a) of each row of block a, bf16, into the v and A_kk regions, once per row (R_a is the prefix
//      of the totals when the warp's loop reaches warp 4 a: the bits of G2[16 a - 1]).
//   A  (warps 0 .. 9, or 0 .. 5) one 16 x 16 block (a, b) of A_qk AND A_kk per warp, reference R_a =
//      G[16a - 1] (R_0 = 0, G non-increasing since g <= 0): mma.m16n8k16 operands
//        A rows   q_i exp(G_i - R_a), k_i exp(G_i - R_a)  (exponent <= 0; one exp serves both): staged, by
//                 ldmatrix; else formed in registers from the raw q, k and G by each of the a + 1 blocks of the row
//        B cols   k_j exp(R_a - G_j)                      (b < a: exponent <= 0), formed in registers
//      Staged, the A warps meet at named barrier 1 (the others at barrier 2; all threads at a __syncthreads with the
//      per-pair diagonal) before the first A_kk store overwrites k~.
//      Diagonal blocks (b = a): where no 16-row block decays by more than 80 (kDiagMma: the bounded gate with
//      lower bound >= -5, always; other gates: tested per chunk-head on its G, `dmma`), the same factoring, col
//      exponents in [0, 80] (e^80 finite in fp32 and bf16; the masked upper triangle stays finite); otherwise
//      per pair i >= j on CUDA cores in fp32, exponents G_i - G_j <= 0, each pair's D channels split over
//      D / 32 lanes (shuffle sum).
//      mq_i mk_j (and beta_i) scale the fp32 accumulators; A_qk stays in registers as bf16 pairs until phase S
//      (the per-pair diagonal goes straight to the scratch), A_kk to shared memory.
//   X  (all threads, after their A block) Qg and Kg -> scratch (one exp per element for both;
//      thread = row x 8 channels, 16-byte stores), KdT -> scratch (warp = 16 channels x 16 rows, lanes l and
//      l + 16 fill one 32-byte sector of a KdT row; the upper half-warp takes its row pairs in the order m ^ 1,
//      so the G2 and k loads stay bank-conflict free).
//   S  the A_qk fragments -> a stage in the G2 region;
//      T = (I + A_kk)^-1 in fp32: forward substitution in the four diagonal 16 x 16 blocks (one warp each);
//      then the A_qk stage -> scratch (one 16-byte segment per thread, zeros above the diagonal blocks) and the
//      block substitution T_ab = -T_aa sum_{m=b}^{a-1} L_am T_mb by distance a - b (thread = row x 4 columns,
//      float4 loads, the scalar summation order); Tb = T diag(beta) bf16 -> scratch (float4 items).
//   The prep ends there: Kg (and v, unless Params::v_in_walk, when phase L does not load v at all) went to the
//   scratch in phase X, Tb from the loop that forms it; the walk forms Wn = -Tb Kg and U0 = Tb V itself
//   (walk_rs.cuh). Why: the prep is issue-bound, and those products cost it more than forming Wn costs the walk's
//   load warpgroup (docs/ops/kda.md).
// Precision: bf16 operands of the products, each rounded once; fp32 accumulation and substitution. Measured on the
// H200 against the fp64 oracle (bf16 inputs, worse of o / final state): 2.5-3.1e-3 on the test-size prefill cases,
// 2.7-3.2e-3 at model shapes (bar 5e-3); racecheck clean.
// Cost (H200, ncu, 1 x 16384 H64): ~0.9 ms, ~35 K warp instructions per chunk-head, issue-bound (the phases' shares
// of the stall samples and the steps that got it there: docs/ops/kda.md).
//
// Shared memory (bytes, D = 128 / 64): G2 fp32 [64][D + 8] (later T fp32 [64][68] + 3 x [16][16] scratch +
// the A_qk stage bf16 [64][72]) 34816 / 29696; q raw bf16 [64][D + 8] 17408 / 9216; k raw 17408 / 9216;
// v bf16 [64][D + 8] or the staged q~ 17408 / 9216; A_kk fp32 [64][68] 17408 (the staged k~ before it); the cumsum
// warp totals [16][D] fp32 8192 / 4096; beta, mq, mk, GC2 1280 / 1024; the mbarrier of the bulk row copies 16 (raw g
// lands in the G2 region). Total 113936 / 79888 (two CTAs: 2 x (113936 + 1 K reserved) of the SM's 228 K). Row pads
// keep the fragment loads, ldmatrix and the 16-byte row accesses bank-conflict free.
#pragma once

#include "cuda/bulk_copy.cuh"
#include "cuda/kda/chunk.cuh"

namespace kimi::cuda::kda_chunk {

constexpr int kPrepThreads = 512;  // 16 warps, two CTAs per SM

template <int D>
struct PrepSmem {
  static constexpr int LDB = D + 8;   // bf16 [64][D] rows
  static constexpr int LDG = D + 8;   // fp32 [64][D] rows (G2)
  static constexpr int LDA = kC + 4;  // fp32 [64][64] rows (A_kk, T)
  static constexpr size_t mx(size_t a, size_t b) { return a > b ? a : b; }
  static constexpr size_t kRowsB = size_t(kC) * LDB * 2;
  static constexpr size_t kA = size_t(kC) * LDA * 4;
  static constexpr int LDQ = kC + 8;  // bf16 [64][64] rows (A_qk stage)
  static constexpr size_t kSolve = 3 * 256 * 4;                      // 3 x [16][16] fp32
  static constexpr size_t kAqk = size_t(kC) * LDQ * 2;               // A_qk stage bf16 [64][LDQ]
  static constexpr size_t G = 0;  // G2; then T + solve scratch + A_qk stage
  static constexpr size_t AQS = G + kA + kSolve;                      // A_qk stage (S)
  static constexpr size_t Q = G + mx(size_t(kC) * LDG * 4, kA + kSolve + kAqk);  // q raw
  static constexpr size_t K = Q + kRowsB;                             // k raw
  static constexpr size_t V = K + kRowsB;                             // v
  static constexpr size_t AKK = V + kRowsB;                           // k~ (staged), then A_kk
  static constexpr size_t TOT = AKK + kA;                             // cumsum warp totals [16][D] fp32
  static constexpr size_t BETA = TOT + size_t(kPrepThreads / 32) * D * 4;
  static constexpr size_t MQ = BETA + kC * 4;
  static constexpr size_t MK = MQ + kC * 4;
  static constexpr size_t GC = MK + kC * 4;
  static constexpr size_t BAR = GC + D * 4;  // mbarrier of the row copies (bulk path)
  static constexpr size_t TOTAL = BAR + 16;
  static_assert(D == 64 || D == 128, "head sizes");
  static_assert(kRowsB <= kA, "the staged k~ rows fit the A_kk region");
  static_assert(AQS % 16 == 0 && Q % 16 == 0 && K % 16 == 0 && V % 16 == 0 && AKK % 16 == 0 && TOT % 16 == 0 &&
                    BETA % 16 == 0 && GC % 16 == 0 && kA % 16 == 0,
                "16-byte aligned regions");
  static_assert(G % 128 == 0 && Q % 128 == 0 && K % 128 == 0 && V % 128 == 0, "tensor-map copy destinations");
  static_assert(BAR % 8 == 0, "mbarrier aligned (the raw g rows of the bulk path fit the G region: see above)");
  static_assert(2 * (TOTAL + 1024) <= 228 * 1024, "two CTAs per SM (sm_90: 228 KB, 1 KB reserved per CTA)");
};
static_assert(PrepSmem<128>::TOTAL == 113936 && PrepSmem<64>::TOTAL == 79888, "documented sizes");

__device__ __forceinline__ float ex2(float x) {  // 2^x, MUFU (what __expf uses after its multiply)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// N (2 or 4) floats -> N bf16 at dst (2 N-byte aligned), or N floats at dst (4 N-byte aligned); shared or global.
template <int N>
__device__ __forceinline__ void sts_bf16(bf16* dst, const float (&x)[N]) {
  static_assert(N == 2 || N == 4, "row pieces");
  if constexpr (N == 4)
    *reinterpret_cast<uint2*>(dst) = make_uint2(pack_bf16(x[0], x[1]), pack_bf16(x[2], x[3]));
  else
    *reinterpret_cast<uint32_t*>(dst) = pack_bf16(x[0], x[1]);
}
template <int N>
__device__ __forceinline__ void sts_f32(float* dst, const float (&x)[N]) {
  static_assert(N == 2 || N == 4, "row pieces");
  if constexpr (N == 4)
    *reinterpret_cast<float4*>(dst) = make_float4(x[0], x[1], x[2], x[3]);
  else
    *reinterpret_cast<float2*>(dst) = make_float2(x[0], x[1]);
}
template <int N>
__device__ __forceinline__ void lds_f32(float (&x)[N], const float* src) {
  static_assert(N == 2 || N == 4, "row pieces");
  if constexpr (N == 4) {
    const float4 v = *reinterpret_cast<const float4*>(src);
    x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
  } else {
    const float2 v = *reinterpret_cast<const float2*>(src);
    x[0] = v.x, x[1] = v.y;
  }
}

// NW (1 or 2) 32-bit words of bf16 pairs at p (4 NW-byte aligned, global or shared memory): one vector load or
// store, and the 2 NW values as floats (exact).
template <int NW>
__device__ __forceinline__ void ld_words(uint32_t (&w)[NW], const bf16* p) {
  static_assert(NW == 1 || NW == 2, "row pieces");
  if constexpr (NW == 2) {
    const uint2 u = *reinterpret_cast<const uint2*>(p);
    w[0] = u.x, w[1] = u.y;
  } else {
    w[0] = *reinterpret_cast<const uint32_t*>(p);
  }
}
template <int NW>
__device__ __forceinline__ void st_words(bf16* p, const uint32_t (&w)[NW]) {
  static_assert(NW == 1 || NW == 2, "row pieces");
  if constexpr (NW == 2)
    *reinterpret_cast<uint2*>(p) = make_uint2(w[0], w[1]);
  else
    *reinterpret_cast<uint32_t*>(p) = w[0];
}
template <int NW>
__device__ __forceinline__ void unpack_bf16(const uint32_t (&w)[NW], float (&x)[2 * NW]) {
#pragma unroll
  for (int e = 0; e < NW; ++e) x[2 * e] = bf_lo(w[e]), x[2 * e + 1] = bf_hi(w[e]);
}

constexpr int kGateRuntime = -1;  // prep_load_rows: gate form read from Params per element (generic path)

template <int D>
struct RowCtx {  // what phase L of kda_chunk_prep needs
  const Params& p;
  int h;
  int64_t tok0, bb;
  int rows, warp, lane;
  bf16 *sQ, *sK, *sV;
  const bf16* sGraw;  // the bulk path's raw g rows [64][LDB] (in the G2 region, dead before G2 is written)
  float *sBeta, *sMq, *sMk;
};

// The per-row work of phase L shared by the three load paths, for row r of the warp (index rr of its RPW rows) and
// this lane's EPL channels: this lane's part of the sums of squares of q and k -> sq, sk (prep_row_norms reduces
// them once the warp's rows are done), beta (sigmoid) -> shared memory (lane 0), g2 = gate(g) log2 e -> gl_row (0
// beyond the sequence: such rows neither decay nor update).
// Fast math throughout (MUFU rsqrt, ex2, lg2, rcp: relative errors ~1e-7, and softplus in its stable form
// max(x, 0) + log(1 + exp(-|x|)), absolute error ~1e-7): far below the rounding of the bf16 operands these factors
// scale (the prefill is not an fp32-accurate path: chunk.cuh). The IEEE forms (1 / sqrtf, expf, log1pf) cost ~60
// warp instructions per row of the bounded gate and ~160 more of the softplus gate (their range checks and
// slow-path calls), at 64 rows per chunk-head.
template <int D, int kGate>
__device__ __forceinline__ void prep_row_factors(const RowCtx<D>& c, int r, const float (&xq)[D / 32],
                                                 const float (&xk)[D / 32], const float (&xg)[D / 32], float xb,
                                                 const float (&dtb)[D / 32], float gate_a, float (&gl_row)[D / 32],
                                                 float& sq, float& sk) {
  constexpr int EPL = D / 32;
  constexpr float kLog2e = 1.4426950408889634f;
  const Params& p = c.p;
  const int gate = kGate == kGateRuntime ? p.gate : kGate;
  const bool valid = r < c.rows;
  sq = 0.f, sk = 0.f;
#pragma unroll
  for (int e = 0; e < EPL; ++e) {
    sq += xq[e] * xq[e];
    sk += xk[e] * xk[e];
  }
  // g2 = gate(g) log2 e with the constants folded: bounded lb log2 e / (1 + 2^(-a log2 e (g + dt_bias))) (one FFMA
  // for the exponent: the loop-invariant -a log2 e dt_bias is hoisted over the rows), softplus -a log2 e softplus(x)
  const float na2 = -gate_a * kLog2e;
#pragma unroll
  for (int e = 0; e < EPL; ++e) {
    float g2 = xg[e] * kLog2e;
    if (gate == kGateSoftplus) {
      const float x = xg[e] + dtb[e];
      g2 = na2 * (fmaxf(x, 0.f) + __logf(1.f + __expf(-fabsf(x))));
    } else if (gate == kGateBounded) {
      g2 = __fdividef(p.lb * kLog2e, 1.f + ex2(fmaf(xg[e], na2, na2 * dtb[e])));  // -> 0 when ex2 overflows
    }
    gl_row[e] = valid ? g2 : 0.f;
  }
  if (c.lane == 0) {
    float bv = xb;
    if (valid && p.beta_sigmoid) bv = __fdividef(1.f, 1.f + __expf(-bv));  // -> 0 when the exponential overflows
    c.sBeta[r] = valid ? bv : 0.f;
  }
}

// The L2-norm multipliers of the warp's 4 rows (4 warp .. + 3), from each lane's parts of their sums of squares:
// mq = scale / ||q|| (or scale), mk = 1 / ||k|| (or 1) -> shared memory, applied when operands are formed. The 8
// sums are reduced together by a transposed butterfly: across lane bit 16 each lane keeps 4 of them and sends the other
// 4, across bit 8 2, across bit 4 1, then plain steps across bits 2 and 1 (9 shuffles instead of 8 x 5); lane l ends
// with sum 4 b16 + 2 b8 + b4 (its lane bits), added in warp_sum's order (xor 16, 8, 4, 2, 1), so the same bits as one
// warp_sum per row.
template <int D>
__device__ __forceinline__ void prep_row_norms(const RowCtx<D>& c, const float (&sq)[4], const float (&sk)[4]) {
  const Params& p = c.p;
  const int lane = c.lane;
  if (!p.l2norm) {
    if (lane < 4) c.sMq[4 * c.warp + lane] = p.scale, c.sMk[4 * c.warp + lane] = 1.f;
    return;
  }
  constexpr unsigned kAll = 0xffffffffu;
  const bool b16 = lane & 16, b8 = lane & 8, b4 = lane & 4;
  const float v[8] = {sq[0], sq[1], sq[2], sq[3], sk[0], sk[1], sk[2], sk[3]};
  float w[4], x[2];
#pragma unroll
  for (int i = 0; i < 4; ++i) w[i] = (b16 ? v[i + 4] : v[i]) + __shfl_xor_sync(kAll, b16 ? v[i] : v[i + 4], 16);
#pragma unroll
  for (int i = 0; i < 2; ++i) x[i] = (b8 ? w[i + 2] : w[i]) + __shfl_xor_sync(kAll, b8 ? w[i] : w[i + 2], 8);
  float y = (b4 ? x[1] : x[0]) + __shfl_xor_sync(kAll, b4 ? x[0] : x[1], 4);
  y += __shfl_xor_sync(kAll, y, 2);
  y += __shfl_xor_sync(kAll, y, 1);
  if ((lane & 3) == 0) {
    const int idx = (b16 ? 4 : 0) + (b8 ? 2 : 0) + (b4 ? 1 : 0), r = 4 * c.warp + (idx & 3);
    if (idx < 4)
      c.sMq[r] = p.scale * rsqrtf(y + 1e-6f);
    else
      c.sMk[r] = rsqrtf(y + 1e-6f);
  }
}

// The gate parameters of the lane's channels: exp(A_log[h]) and dt_bias (0 without a gate).
template <int D, int kGate>
__device__ __forceinline__ float prep_gate_params(const RowCtx<D>& c, float (&dtb)[D / 32]) {
  const Params& p = c.p;
  const int gate = kGate == kGateRuntime ? p.gate : kGate, ch = c.lane * (D / 32);
#pragma unroll
  for (int e = 0; e < D / 32; ++e) dtb[e] = gate != kGateNone ? p.dt_bias[int64_t(c.h) * D + ch + e] : 0.f;
  return gate != kGateNone ? expf(p.A_log[c.h * p.s_A]) : 0.f;
}

// Phase L of kda_chunk_prep for the warp's 4 contiguous rows, from global memory: raw q, k and v (bf16) and
// beta, mq, mk to shared memory, g2 of each row to gl (prep_row_factors). kBf16 (q, k, v, g bf16 with 8-byte
// aligned row pieces, Params::rows_bf16): one vector load per row and tensor, q, k, v stored as loaded, all 4
// rows' loads in flight at once; else any dtype and alignment (load_raw / raw_to_f32), two rows at a time.
// kGate: the gate form at compile time (kGateRuntime: read from Params).
template <int D, int kGate, bool kBf16>
__device__ __forceinline__ void prep_load_rows(const RowCtx<D>& c, float (&gl)[kC / (kPrepThreads / 32)][D / 32]) {
  constexpr int EPL = D / 32, RPW = kC / (kPrepThreads / 32), BATCH = kBf16 ? RPW : 2;
  constexpr int NW = kBf16 ? EPL / 2 : EPL;  // raw words per row and tensor
  constexpr int LDB = PrepSmem<D>::LDB;
  static_assert(kBf16 || kGate == kGateRuntime, "the generic path reads the gate form at run time");
  const Params& p = c.p;
  const int ch = c.lane * EPL;
  const int64_t oq = c.bb * p.s_q[0] + c.h * p.s_q[2] + ch, ok = c.bb * p.s_k[0] + c.h * p.s_k[2] + ch;
  const int64_t ov = c.bb * p.s_v[0] + c.h * p.s_v[2] + ch, og = c.bb * p.s_g[0] + c.h * p.s_g[2] + ch;
  float dtb[EPL];
  float sq[RPW], sk[RPW];  // this lane's parts of the rows' sums of squares (prep_row_norms)
  const float gate_a = prep_gate_params<D, kGate>(c, dtb);
#pragma unroll
  for (int b0 = 0; b0 < RPW; b0 += BATCH) {
    uint32_t wq[BATCH][NW], wk[BATCH][NW], wg[BATCH][NW], wv[BATCH][NW], wb[BATCH][1];
#pragma unroll
    for (int rr = 0; rr < BATCH; ++rr) {  // every load of the batch before the first conversion
      const int r = RPW * c.warp + b0 + rr;
      const int64_t tok = c.tok0 + r;
#pragma unroll
      for (int e = 0; e < NW; ++e) wq[rr][e] = wk[rr][e] = wg[rr][e] = wv[rr][e] = 0u;  // 0.0 in every dtype
      wb[rr][0] = 0u;
      if (r < c.rows) {
        if constexpr (kBf16) {
          ld_words<NW>(wq[rr], static_cast<const bf16*>(p.q) + oq + tok * p.s_q[1]);
          ld_words<NW>(wk[rr], static_cast<const bf16*>(p.k) + ok + tok * p.s_k[1]);
          ld_words<NW>(wg[rr], static_cast<const bf16*>(p.g) + og + tok * p.s_g[1]);
          ld_words<NW>(wv[rr], static_cast<const bf16*>(p.v) + ov + tok * p.s_v[1]);
        } else {
          load_raw<EPL>(p.q, p.dt_q, oq + tok * p.s_q[1], wq[rr]);
          load_raw<EPL>(p.k, p.dt_k, ok + tok * p.s_k[1], wk[rr]);
          load_raw<EPL>(p.g, p.dt_g, og + tok * p.s_g[1], wg[rr]);
          load_raw<EPL>(p.v, p.dt_v, ov + tok * p.s_v[1], wv[rr]);
        }
        if (c.lane == 0)
          load_raw<1>(p.beta, p.dt_beta, c.bb * p.s_beta[0] + tok * p.s_beta[1] + c.h * p.s_beta[2], wb[rr]);
      }
    }
#pragma unroll
    for (int rr = 0; rr < BATCH; ++rr) {
      const int r = RPW * c.warp + b0 + rr;
      float xq[EPL], xk[EPL], xg[EPL], xb[1];
      if constexpr (kBf16) {
        unpack_bf16<NW>(wq[rr], xq);
        unpack_bf16<NW>(wk[rr], xk);
        unpack_bf16<NW>(wg[rr], xg);
        st_words<NW>(c.sQ + r * LDB + ch, wq[rr]);  // raw values, exact
        st_words<NW>(c.sK + r * LDB + ch, wk[rr]);
        st_words<NW>(c.sV + r * LDB + ch, wv[rr]);
      } else {
        float xv[EPL];
        raw_to_f32<EPL>(wq[rr], p.dt_q, xq);
        raw_to_f32<EPL>(wk[rr], p.dt_k, xk);
        raw_to_f32<EPL>(wg[rr], p.dt_g, xg);
        raw_to_f32<EPL>(wv[rr], p.dt_v, xv);
        sts_bf16<EPL>(c.sQ + r * LDB + ch, xq);  // raw values (exact for bf16 inputs)
        sts_bf16<EPL>(c.sK + r * LDB + ch, xk);
        sts_bf16<EPL>(c.sV + r * LDB + ch, xv);
      }
      raw_to_f32<1>(wb[rr], p.dt_beta, xb);
      prep_row_factors<D, kGate>(c, r, xq, xk, xg, xb[0], dtb, gate_a, gl[b0 + rr], sq[b0 + rr], sk[b0 + rr]);
    }
  }
  prep_row_norms<D>(c, sq, sk);
}

// Issue of the bulk path's row tiles (Params::rows_bulk: q, k, v, g bf16, every row 16-byte aligned), by the one
// thread that posted the mbarrier's expected bytes: one tensor-map copy per tensor (Params::rows_map) of the chunk's
// 64 rows into its padded shared rows (stride LDB; g raw into the G2 region; v not at all with Params::v_in_walk).
// Rows past the sequence end land too (the next sequence's, or zeros past T); phase L zeroes them. The per-row
// bulk copies (192 per chunk-head, issued one lane at a time) took ~7% of the prep's stall samples
// (docs/gpu/2026-11-30-h200-run23-prep-ncu.txt).
template <int D>
__device__ __forceinline__ void prep_issue_row_tiles(const RowCtx<D>& c, uint64_t* bar) {
  const Params& p = c.p;
  bf16* const dst[4] = {c.sQ, c.sK, c.sV, const_cast<bf16*>(c.sGraw)};
#pragma unroll
  for (int t = 0; t < 4; ++t)
    if (t != 2 || !p.v_in_walk) tma_load_4d(dst[t], &p.rows_map[t], 0, c.h, int(c.tok0), int(c.bb), bar);
}

// Phase L of the bulk path for the warp's rows, once the copies have landed (mbar_wait): q, k, g read back
// from shared memory for prep_row_factors; rows beyond the sequence end get zero q, k, v rows (the later
// phases read them) and g2 = 0.
template <int D, int kGate>
__device__ __forceinline__ void prep_bulk_rows(const RowCtx<D>& c, uint64_t* bar,
                                               float (&gl)[kC / (kPrepThreads / 32)][D / 32]) {
  constexpr int EPL = D / 32, RPW = kC / (kPrepThreads / 32), NW = EPL / 2;
  constexpr int LDB = PrepSmem<D>::LDB;
  const Params& p = c.p;
  const int ch = c.lane * EPL;
  float dtb[EPL];
  float sq[RPW], sk[RPW];  // this lane's parts of the rows' sums of squares (prep_row_norms)
  const float gate_a = prep_gate_params<D, kGate>(c, dtb);
  uint32_t wb[RPW][1];
#pragma unroll
  for (int rr = 0; rr < RPW; ++rr) {  // beta in flight while the rows land
    const int r = RPW * c.warp + rr;
    wb[rr][0] = 0u;
    if (c.lane == 0 && r < c.rows)
      load_raw<1>(p.beta, p.dt_beta, c.bb * p.s_beta[0] + (c.tok0 + r) * p.s_beta[1] + c.h * p.s_beta[2], wb[rr]);
  }
  mbar_wait(bar, 0);
#pragma unroll
  for (int rr = 0; rr < RPW; ++rr) {
    const int r = RPW * c.warp + rr;
    const int o = r * LDB + ch;
    uint32_t wq[NW] = {}, wk[NW] = {}, wg[NW] = {};  // 0.0 beyond the sequence end
    if (r < c.rows) {
      ld_words<NW>(wq, c.sQ + o);
      ld_words<NW>(wk, c.sK + o);
      ld_words<NW>(wg, c.sGraw + o);
    } else {  // zero rows (wq = 0 here) for the later phases
      st_words<NW>(c.sQ + o, wq);
      st_words<NW>(c.sK + o, wq);
      st_words<NW>(c.sV + o, wq);
    }
    float xq[EPL], xk[EPL], xg[EPL], xb[1];
    unpack_bf16<NW>(wq, xq);
    unpack_bf16<NW>(wk, xk);
    unpack_bf16<NW>(wg, xg);
    raw_to_f32<1>(wb[rr], p.dt_beta, xb);
    prep_row_factors<D, kGate>(c, r, xq, xk, xg, xb[0], dtb, gate_a, gl[rr], sq[rr], sk[rr]);
  }
  prep_row_norms<D>(c, sq, sk);
}

template <int D, bool kDiagMma>
__global__ void __launch_bounds__(kPrepThreads, 2) kda_chunk_prep(const __grid_constant__ Params p) {
  using L = PrepSmem<D>;
  constexpr int kThreads = kPrepThreads, kWarps = kThreads / 32;
  constexpr int LDB = L::LDB, LDG = L::LDG, LDA = L::LDA, LDQ = L::LDQ;
  constexpr int EPL = D / 32;           // channels per lane in row loads
  constexpr int RPW = kC / kWarps;      // contiguous rows per warp
  static_assert(RPW == 4, "row ownership");
  extern __shared__ __align__(128) unsigned char smem[];  // one declaration for the TU: the walk needs 128
  float* const sG = reinterpret_cast<float*>(smem + L::G);             // G2 [64][LDG]        (L - X)
  float* const sT = reinterpret_cast<float*>(smem + L::G);             // T [64][LDA]         (S)
  float* const sP = reinterpret_cast<float*>(smem + L::G + L::kA);     // 3 x [16][16]        (S)
  bf16* const sAqs = reinterpret_cast<bf16*>(smem + L::AQS);            // A_qk stage [64][LDQ] (S)
  bf16* const sQ = reinterpret_cast<bf16*>(smem + L::Q);               // q raw [64][LDB]     (L - X)
  bf16* const sK = reinterpret_cast<bf16*>(smem + L::K);               // k raw [64][LDB]     (L - X)
  bf16* const sV = reinterpret_cast<bf16*>(smem + L::V);               // v [64][LDB]         (L - X)
  bf16* const sQs = reinterpret_cast<bf16*>(smem + L::V);              // q~ [64][LDB]        (L - A, staged)
  bf16* const sKs = reinterpret_cast<bf16*>(smem + L::AKK);            // k~ [64][LDB]        (L - A, staged)
  float* const sTot = reinterpret_cast<float*>(smem + L::TOT);         // [16][D] warp totals (L)
  float* const sAkk = reinterpret_cast<float*>(smem + L::AKK);         // A_kk [64][LDA]      (A - S)
  float* const sBeta = reinterpret_cast<float*>(smem + L::BETA);
  float* const sMq = reinterpret_cast<float*>(smem + L::MQ);  // per-row multiplier of the raw q
  float* const sMk = reinterpret_cast<float*>(smem + L::MK);  // per-row multiplier of the raw k
  float* const sGC = reinterpret_cast<float*>(smem + L::GC);  // G2[63]
  const bf16* const sGraw = reinterpret_cast<const bf16*>(smem + L::G);  // raw g [64][LDB] (L, bulk path)
  uint64_t* const sBar = reinterpret_cast<uint64_t*>(smem + L::BAR);     // the bulk path's row copies

  // launched with blockDim.x == kThreads and the dynamic shared memory 128-byte aligned
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int gq = lane >> 2, tq = lane & 3;  // mma fragment coordinates

  const int64_t cid = int64_t(blockIdx.x);  // chunk * H + head
  const int h = int(cid % p.H);
  const int64_t chunk = cid / p.H;
  const int64_t tok0 = p.tab[3 * chunk], bb = p.tab[3 * chunk + 1];
  const int rows = int(p.tab[3 * chunk + 2]);
  // chunk < p.nch, 1 <= rows <= kC (the launcher's chunk table)
  bf16* const gaqk = p.scr.aqk + cid * (kC * kC);  // A_qk [64][64] (scr_tile_off)

  // ---- L: rows -> q, k raw (bf16), v (bf16), beta, multipliers; G2 = cumsum(g) log2 e ----------------------
  const int ch = lane * EPL;
  // Phase A's row operands staged once per row in phase L (q~ in the v region, k~ in the A_kk region) where v does not
  // occupy shared memory (Params::v_in_walk); else each A block forms them in registers (the same bits).
  const bool staged = p.v_in_walk;
  {
    float gl[RPW][EPL];  // g2 of the warp's rows, then their inclusive cumsum
    const RowCtx<D> rc{p, h, tok0, bb, rows, warp, lane, sQ, sK, sV, sGraw, sBeta, sMq, sMk};
    if (p.rows_bulk) {  // uniform branches: the dtype and gate tests leave the per-element code
      // Thread 0 inits the mbarrier, expects every byte and issues the copies; the others wait after the barrier.
      static_assert(L::kRowsB == size_t(kC) * (D + 8) * 2, "one tensor-map box per padded row tile");
      if (tid == 0) {
        mbar_init(sBar, 1);
        mbar_init_fence();
        mbar_expect_tx(sBar, uint32_t(p.v_in_walk ? 3 : 4) * uint32_t(L::kRowsB));  // q, k, (v,) g: whole boxes
        prep_issue_row_tiles<D>(rc, sBar);
      }
      __syncthreads();  // the init before any wait
      if (p.gate == kGateBounded)
        prep_bulk_rows<D, kGateBounded>(rc, sBar, gl);
      else if (p.gate == kGateSoftplus)
        prep_bulk_rows<D, kGateSoftplus>(rc, sBar, gl);
      else
        prep_bulk_rows<D, kGateNone>(rc, sBar, gl);
    } else if (p.rows_bf16) {
      if (p.gate == kGateBounded)
        prep_load_rows<D, kGateBounded, true>(rc, gl);
      else if (p.gate == kGateSoftplus)
        prep_load_rows<D, kGateSoftplus, true>(rc, gl);
      else
        prep_load_rows<D, kGateNone, true>(rc, gl);
    } else {
      prep_load_rows<D, kGateRuntime, false>(rc, gl);
    }
#pragma unroll
    for (int rr = 1; rr < RPW; ++rr)
#pragma unroll
      for (int e = 0; e < EPL; ++e) gl[rr][e] += gl[rr - 1][e];
    sts_f32<EPL>(sTot + warp * D + ch, gl[RPW - 1]);
    __syncthreads();
    // the totals of the warps before this one, added in warp order: four loads in flight at a time (a loop
    // over `warp` issued one load and waited on it per warp: the cumsum prefix held 8% of the stall samples)
    // R_a = G2[16 a - 1] of the warp's row block a = warp / 4 is the prefix of the 4 a warps before the block: pre
    // when the loop reaches warp 4 a (the same additions in the same order as row 16 a - 1's own cumsum, so the
    // same bits as sG[16 a - 1]; R_0 = 0)
    float pre[EPL], ra[EPL];
#pragma unroll
    for (int e = 0; e < EPL; ++e) pre[e] = ra[e] = 0.f;
    const int w_ra = warp & ~3;
    for (int w0 = 0; w0 < warp; w0 += 4) {  // warp-uniform
      if (w0 == w_ra)
#pragma unroll
        for (int e = 0; e < EPL; ++e) ra[e] = pre[e];
      float t[4][EPL];
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (w0 + u < warp) lds_f32<EPL>(t[u], sTot + (w0 + u) * D + ch);
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (w0 + u < warp)
#pragma unroll
          for (int e = 0; e < EPL; ++e) pre[e] += t[u][e];
    }
    if (warp == w_ra)
#pragma unroll
      for (int e = 0; e < EPL; ++e) ra[e] = pre[e];
#pragma unroll
    for (int rr = 0; rr < RPW; ++rr) {
#pragma unroll
      for (int e = 0; e < EPL; ++e) gl[rr][e] += pre[e];
      sts_f32<EPL>(sG + (RPW * warp + rr) * LDG + ch, gl[rr]);
    }
    if (staged) {  // phase A's row operands q~ = q exp(G - R_a), k~ = k exp(G - R_a) of the warp's rows (see A)
      constexpr int NW = EPL / 2;
#pragma unroll
      for (int rr = 0; rr < RPW; ++rr) {
        const int o = (RPW * warp + rr) * LDB + ch;
        uint32_t wq[NW], wk[NW], oq[NW], ok[NW];
        ld_words<NW>(wq, sQ + o);
        ld_words<NW>(wk, sK + o);
#pragma unroll
        for (int m = 0; m < NW; ++m) {
          const float e0 = ex2(gl[rr][2 * m] - ra[2 * m]), e1 = ex2(gl[rr][2 * m + 1] - ra[2 * m + 1]);
          oq[m] = pack_bf16(bf_lo(wq[m]) * e0, bf_hi(wq[m]) * e1);
          ok[m] = pack_bf16(bf_lo(wk[m]) * e0, bf_hi(wk[m]) * e1);
        }
        st_words<NW>(sQs + o, oq);
        st_words<NW>(sKs + o, ok);
      }
    }
    if (warp == kWarps - 1) {  // row 63: GC2, decay = exp(GC) -> scratch
      float dec[EPL];
#pragma unroll
      for (int e = 0; e < EPL; ++e) dec[e] = ex2(gl[RPW - 1][e]);
      sts_f32<EPL>(sGC + ch, gl[RPW - 1]);
      sts_f32<EPL>(p.scr.decay + cid * D + ch, dec);
    }
  }
  __syncthreads();  // G2, raw rows, multipliers visible; the totals are dead (A_kk may be written)

  // The diagonal blocks on the tensor cores (dmma) where their factoring cannot overflow: always with kDiagMma
  // (bounded gate, lower bound >= -5: at most 80 of decay in 16 rows), else where this chunk-head's data allow it:
  // every 16-row block's decay R_a - G[16 a + 15] (thread = block a x channel c) within the same 80 (80 log2 e in
  // G2's log2 units; NaN fails the test). A block beyond it multiplies the state by less than e^-80 within 16 rows: the
  // per-pair loop on CUDA cores remains for such extreme gates. Cost and precision (H200): softplus
  // 1 x 16384 H64 2.499 -> 2.163 ms against the per-pair loop everywhere; its bf16-operand products give the softplus gate the bounded gate's errors
  // (small harness cases vs fp64: o 2.0-2.2e-3 -> 2.1-2.8e-3, final state unchanged; bar 5e-3, FLA 3.7e-3).
  // kDiagMma skips the test where the launcher knows it passes: the test alone (one more barrier, __syncthreads_or)
  // cost the bounded gate's prep 1.03 -> 1.05-1.06 ms (ncu, 1 x 16384 H64, docs/gpu/2026-11-30-h200-run32.txt), more
  // than the second instantiation costs in compile time (chunk.cu 21 s -> 15 s without it, nvcc, one core).
  bool dmma = kDiagMma;
  if constexpr (!kDiagMma) {
    constexpr float kDiagSpan2 = 80.f * 1.4426950408889634f;
    float span = 0.f;
    if (tid < 4 * D) {
      const int a = tid / D, c = tid % D;
      span = (a ? sG[(16 * a - 1) * LDG + c] : 0.f) - sG[(16 * a + 15) * LDG + c];
    }
    dmma = !__syncthreads_or(!(span <= kDiagSpan2));
  }

  // ---- A: one 16 x 16 block (a, b) of A_qk and A_kk per warp: staged A rows, B operands formed in registers -
  const int units = dmma ? 10 : 6;
  // this warp's A_qk fragments as bf16 pairs [row half rr][n8 tile], staged in phase S (the G2 region is live
  // until then) and stored from there 16-byte coalesced
  uint32_t aq[2][2] = {};
  int aq_i0 = 0, aq_j0 = 0;
  int a = 0, b = 0;
  float acc[2][2][4] = {};  // [A_qk, A_kk][n8 tile][fragment]
  if (warp < units) {
    if (dmma) {
      a = warp < 1 ? 0 : warp < 3 ? 1 : warp < 6 ? 2 : 3;
      b = warp - a * (a + 1) / 2;
    } else {
      a = warp < 1 ? 1 : warp < 3 ? 2 : 3;
      b = warp - a * (a - 1) / 2;
    }
    const float* const Ra = sG + (a ? 16 * a - 1 : 0) * LDG;  // R_a = G2[16a - 1] (R_0 = 0)
    const int i0 = 16 * a + gq, j0 = 16 * b + gq;
    aq_i0 = i0, aq_j0 = 16 * b;
    // the staged A rows by ldmatrix: lane l addresses row 16 a + (l & 15), columns k0 + 8 (l >> 4) (fragments 0 .. 3)
    const int so = (16 * a + (lane & 15)) * LDB + 8 * (lane >> 4);
#pragma unroll 2
    for (int k0 = 0; k0 < D; k0 += 16) {
      float2 R[2];
#pragma unroll
      for (int y = 0; y < 2; ++y)
        R[y] = a ? *reinterpret_cast<const float2*>(Ra + k0 + 2 * tq + 8 * y) : make_float2(0.f, 0.f);
      uint32_t fq[4], fk[4], fb[2][2];
      if (staged) {
        ldsm_x4<false>(fq, sQs + so + k0);
        ldsm_x4<false>(fk, sKs + so + k0);
      } else {
#pragma unroll
        for (int x = 0; x < 4; ++x) {  // A fragment x: row i0 + 8 (x & 1), columns k0 + 2 tq + 8 (x >> 1) + {0, 1}
          const int i = i0 + 8 * (x & 1), c = k0 + 2 * tq + 8 * (x >> 1);
          const float2 gg = *reinterpret_cast<const float2*>(sG + i * LDG + c);
          const float e0 = ex2(gg.x - R[x >> 1].x), e1 = ex2(gg.y - R[x >> 1].y);
          const uint32_t uq = lds32(sQ + i * LDB + c), uk = lds32(sK + i * LDB + c);
          fq[x] = pack_bf16(bf_lo(uq) * e0, bf_hi(uq) * e1);
          fk[x] = pack_bf16(bf_lo(uk) * e0, bf_hi(uk) * e1);
        }
      }
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int y = 0; y < 2; ++y) {  // B fragment y of tile n: row j0 + 8 n, columns k0 + 2 tq + 8 y + {0, 1}
          const int j = j0 + 8 * n, c = k0 + 2 * tq + 8 * y;
          const float2 gg = *reinterpret_cast<const float2*>(sG + j * LDG + c);
          const float e0 = ex2(R[y].x - gg.x), e1 = ex2(R[y].y - gg.y);
          const uint32_t uk = lds32(sK + j * LDB + c);
          fb[n][y] = pack_bf16(bf_lo(uk) * e0, bf_hi(uk) * e1);
        }
#pragma unroll
      for (int n = 0; n < 2; ++n) {
        mma_bf16(acc[0][n], fq, fb[n]);
        mma_bf16(acc[1][n], fk, fb[n]);
      }
    }
  }
  if (staged) {  // every read of k~ (the A_kk region) before the first A_kk store: the A warps (the pair loop's too)
    if (!dmma) {
      __syncthreads();
    } else {
      // the A warps at barrier 1; the others, which never touch the region before the next __syncthreads, at a
      // barrier of their own (2): every thread passes the same number of barriers, without which compute-sanitizer's
      // racecheck reports the accesses of phase S across its __syncthreads as hazards
      // (docs/gpu/2026-11-30-h200-run44.txt)
      if (warp < units)
        asm volatile("bar.sync 1, %0;" ::"r"(32 * units) : "memory");
      else
        asm volatile("bar.sync 2, %0;" ::"r"(kThreads - 32 * units) : "memory");
    }
  }
  if (warp < units) {
    const int i0 = 16 * a + gq, j0 = 16 * b + gq;
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const int i = i0 + 8 * rr;
      const float mqi = sMq[i], mki = sMk[i] * sBeta[i];
#pragma unroll
      for (int n = 0; n < 2; ++n) {
        const int j = j0 - gq + 8 * n + 2 * tq;  // columns j, j + 1
        const float mk0 = sMk[j], mk1 = sMk[j + 1];
        const float q0 = j <= i ? acc[0][n][2 * rr] * mqi * mk0 : 0.f;
        const float q1 = j + 1 <= i ? acc[0][n][2 * rr + 1] * mqi * mk1 : 0.f;
        aq[rr][n] = pack_bf16(q0, q1);
        sAkk[i * LDA + j] = j < i ? acc[1][n][2 * rr] * mki * mk0 : 0.f;
        sAkk[i * LDA + j + 1] = j + 1 < i ? acc[1][n][2 * rr + 1] * mki * mk1 : 0.f;
      }
    }
  }
  if (!dmma) {
    // diagonal blocks per pair i >= j (136 a block), D / 32 lanes a pair (interleaved channel pairs): exp(G_i -
    // G_j) <= 1 for any g <= 0
    constexpr int kParts = D / 32, kItems = 4 * 136 * kParts;
    static_assert(kItems % 32 == 0, "whole warps per iteration (full-mask shuffles)");
    for (int e = tid; e < kItems; e += kThreads) {
      const int part = e % kParts, pr = e / kParts;
      const int a = pr / 136, t = pr % 136;
      int i = int((sqrtf(8.f * float(t) + 1.f) - 1.f) * 0.5f);  // t = i (i + 1) / 2 + j, j <= i
      if ((i + 1) * (i + 2) / 2 <= t) ++i;
      if (i * (i + 1) / 2 > t) --i;
      const int j = t - i * (i + 1) / 2;
      const int I = 16 * a + i, J = 16 * a + j;
      float sq = 0.f, sk = 0.f;
      // the kParts lanes of a pair read adjacent channel pairs (c = 2 part + 2 kParts m): consecutive banks, where
      // contiguous 32-channel parts put all of them on the same bank
#pragma unroll 4
      for (int c = 2 * part; c < D; c += 2 * kParts) {
        const float2 gi = *reinterpret_cast<const float2*>(sG + I * LDG + c);
        const float2 gj = *reinterpret_cast<const float2*>(sG + J * LDG + c);
        const float e0 = ex2(gi.x - gj.x), e1 = ex2(gi.y - gj.y);
        const uint32_t uq = lds32(sQ + I * LDB + c), uki = lds32(sK + I * LDB + c), ukj = lds32(sK + J * LDB + c);
        const float kj0 = bf_lo(ukj) * e0, kj1 = bf_hi(ukj) * e1;
        sq += bf_lo(uq) * kj0 + bf_hi(uq) * kj1;
        sk += bf_lo(uki) * kj0 + bf_hi(uki) * kj1;
      }
#pragma unroll
      for (int o = 1; o < kParts; o <<= 1) {
        sq += __shfl_xor_sync(0xffffffffu, sq, o);
        sk += __shfl_xor_sync(0xffffffffu, sk, o);
      }
      if (part == 0) {
        gaqk[scr_tile_off<kC>(I, J)] = __float2bfloat16_rn(sq * sMq[I] * sMk[J]);
        sAkk[I * LDA + J] = j < i ? sk * sMk[I] * sMk[J] * sBeta[I] : 0.f;
      }
    }
  }

  // ---- X: Qg, Kg (and v) -> scratch; KdT -> scratch; zeros of A_qk above the diagonal ---------------------
  constexpr int kX1 = kC * (D / 8) / kThreads;  // items (row, 8 channels) per thread
  static_assert(kX1 >= 1 && kX1 * kThreads == kC * (D / 8), "whole items");
#pragma unroll
  for (int it = 0; it < kX1; ++it) {
    const int e = tid + it * kThreads;
    const int r = e / (D / 8), c = 8 * (e % (D / 8));
    const float4 g0 = *reinterpret_cast<const float4*>(sG + r * LDG + c);
    const float4 g1 = *reinterpret_cast<const float4*>(sG + r * LDG + c + 4);
    const float gg[8] = {g0.x, g0.y, g0.z, g0.w, g1.x, g1.y, g1.z, g1.w};
    const uint4 uq = *reinterpret_cast<const uint4*>(sQ + r * LDB + c);
    const uint4 uk = *reinterpret_cast<const uint4*>(sK + r * LDB + c);
    const float mq = sMq[r], mk = sMk[r];
    const uint32_t wq[4] = {uq.x, uq.y, uq.z, uq.w}, wk[4] = {uk.x, uk.y, uk.z, uk.w};
    uint32_t oq[4], ok[4];
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const float e0 = ex2(gg[2 * m]), e1 = ex2(gg[2 * m + 1]);
      oq[m] = pack_bf16(bf_lo(wq[m]) * mq * e0, bf_hi(wq[m]) * mq * e1);
      ok[m] = pack_bf16(bf_lo(wk[m]) * mk * e0, bf_hi(wk[m]) * mk * e1);
    }
    stg128(p.scr.qg + cid * (kC * D) + scr_tile_off<kC>(r, c), make_uint4(oq[0], oq[1], oq[2], oq[3]));
    stg128(p.scr.kg + cid * (kC * D) + scr_tile_off<kC>(r, c), make_uint4(ok[0], ok[1], ok[2], ok[3]));
    // v (unless the walk reads it itself), bf16
    if (!p.v_in_walk)
      stg128(p.scr.vb + cid * (kC * D) + scr_tile_off<kC>(r, c), *reinterpret_cast<const uint4*>(sV + r * LDB + c));
  }
  // KdT: warp unit = 16 channels x 16 rows; lane = channel c0 + (lane & 15), rows r0 = 8 (lane >> 4) .. + 8:
  // lanes l and l + 16 fill one 32-byte sector of row c. The upper half-warp takes its row pairs in the order
  // m ^ 1 (rows 8 +- 2 apart from the lower half's): G2 and k loads bank-conflict free.
  // With the diagonal blocks on tensor cores only the warps without an A block take KdT units (they reach phase X
  // one block earlier; barrier stalls were the prep's first stall reason, docs/gpu/2026-11-30-h200-run30.txt); else
  // every warp.
  constexpr int kUnitsX2 = (D / 16) * (kC / 16);
  const int x2_first = dmma ? units : 0;
  for (int u = warp - x2_first; u >= 0 && u < kUnitsX2; u += kWarps - x2_first) {  // warp-uniform
    const int c = 16 * (u % (D / 16)) + (lane & 15), r0 = 16 * (u / (D / 16)) + 8 * (lane >> 4);
    const int sw = lane >> 4;  // 1: pairs in the order m ^ 1
    const float gc = sGC[c];
    uint32_t wd[4];
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const int r = r0 + 2 * (m ^ sw);
      const float k0 = bf2f(sK[r * LDB + c]) * sMk[r], k1 = bf2f(sK[(r + 1) * LDB + c]) * sMk[r + 1];
      wd[m] = pack_bf16(k0 * ex2(gc - sG[r * LDG + c]), k1 * ex2(gc - sG[(r + 1) * LDG + c]));
    }
    const uint4 out = sw ? make_uint4(wd[1], wd[0], wd[3], wd[2]) : make_uint4(wd[0], wd[1], wd[2], wd[3]);
    stg128(p.scr.kdt + cid * (D * kC) + scr_tile_off<D>(c, r0), out);
  }
  static_assert(kC * 8 == kThreads, "one A_qk segment (row r, columns 8 s .. + 8) per thread");
  const int aq_r = tid >> 3, aq_s = tid & 7;
  if (!dmma && (aq_s >> 1) == (aq_r >> 4)) {  // diagonal block segment: the pair loop wrote j <= r
    bf16* const dst = gaqk + scr_tile_off<kC>(aq_r, 8 * aq_s);  // one 16-byte chunk
#pragma unroll
    for (int x = 0; x < 8; ++x)
      if (8 * aq_s + x > aq_r) dst[x] = __float2bfloat16_rn(0.f);
  }
  __syncthreads();  // every read of q, k raw and G2 is done; A_kk complete

  // ---- S: T = (I + A_kk)^-1; Tb = T diag(beta) -> scratch ------------------------------------------------
  if (warp < units) {  // A_qk fragments -> stage (the G2 region beyond T and the solve scratch)
#pragma unroll
    for (int rr = 0; rr < 2; ++rr)
#pragma unroll
      for (int n = 0; n < 2; ++n) sts32(sAqs + (aq_i0 + 8 * rr) * LDQ + aq_j0 + 8 * n + 2 * tq, aq[rr][n]);
  }
  if (warp < 4 && lane < 16) {  // diagonal blocks: forward substitution, lane = column j of block warp
    // row i of L by 16-byte broadcast loads (not one dependent load per product), two partial sums
    const int base = 16 * warp, j = lane;
    float col[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      float Li[16];
#pragma unroll
      for (int q = 0; q < (i + 3) / 4; ++q) {
        const float4 v = *reinterpret_cast<const float4*>(sAkk + (base + i) * LDA + base + 4 * q);
        Li[4 * q] = v.x, Li[4 * q + 1] = v.y, Li[4 * q + 2] = v.z, Li[4 * q + 3] = v.w;
      }
      float s0 = 0.f, s1 = 0.f;
#pragma unroll
      for (int m = 0; m < i; m += 2) {
        s0 += Li[m] * col[m];
        if (m + 1 < i) s1 += Li[m + 1] * col[m + 1];
      }
      col[i] = (i == j ? 1.f : 0.f) - (s0 + s1);
    }
#pragma unroll
    for (int i = 0; i < 16; ++i) sT[(base + i) * LDA + base + j] = col[i];
  }
  __syncthreads();
  {  // A_qk stage -> scratch, one 16-byte segment per thread (zeros above the diagonal blocks; with the
     // per-pair diagonal the pair loop and phase X wrote the diagonal blocks' segments)
    const int bs = aq_s >> 1, br = aq_r >> 4;
    if (bs > br)
      stg128(gaqk + scr_tile_off<kC>(aq_r, 8 * aq_s), make_uint4(0u, 0u, 0u, 0u));
    else if (dmma || bs < br)
      stg128(gaqk + scr_tile_off<kC>(aq_r, 8 * aq_s), *reinterpret_cast<const uint4*>(sAqs + aq_r * LDQ + 8 * aq_s));
  }
#pragma unroll 1
  for (int d = 1; d < 4; ++d) {  // blocks (a, a - d): T_ab = -T_aa sum_{m=b}^{a-1} L_am T_mb
    // thread = (block, row i, 4 columns 4 jq): float4 loads, the same summation order per element as a
    // scalar loop over m, x
    const int nblk = 4 - d, blk = tid >> 6, i = (tid >> 2) & 15, jq = tid & 3;
    const int a = d + blk, b = a - d;
    static_assert(3 * 64 <= kThreads, "one item per thread");
    if (blk < nblk) {
      float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
      for (int m = b; m < a; ++m)
#pragma unroll
        for (int x4 = 0; x4 < 4; ++x4) {
          const float4 l = *reinterpret_cast<const float4*>(sAkk + (16 * a + i) * LDA + 16 * m + 4 * x4);
          const float lv[4] = {l.x, l.y, l.z, l.w};
#pragma unroll
          for (int xx = 0; xx < 4; ++xx) {
            const float4 t = *reinterpret_cast<const float4*>(sT + (16 * m + 4 * x4 + xx) * LDA + 16 * b + 4 * jq);
            s.x += lv[xx] * t.x, s.y += lv[xx] * t.y, s.z += lv[xx] * t.z, s.w += lv[xx] * t.w;
          }
        }
      *reinterpret_cast<float4*>(sP + blk * 256 + i * 16 + 4 * jq) = s;
    }
    __syncthreads();
    if (blk < nblk) {
      float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int x4 = 0; x4 < 4; ++x4) {
        const float4 l = *reinterpret_cast<const float4*>(sT + (16 * a + i) * LDA + 16 * a + 4 * x4);
        const float lv[4] = {l.x, l.y, l.z, l.w};
#pragma unroll
        for (int xx = 0; xx < 4; ++xx) {
          const float4 pp = *reinterpret_cast<const float4*>(sP + blk * 256 + (4 * x4 + xx) * 16 + 4 * jq);
          s.x += lv[xx] * pp.x, s.y += lv[xx] * pp.y, s.z += lv[xx] * pp.z, s.w += lv[xx] * pp.w;
        }
      }
      *reinterpret_cast<float4*>(sT + (16 * a + i) * LDA + 16 * b + 4 * jq) = make_float4(-s.x, -s.y, -s.z, -s.w);
    }
    __syncthreads();
  }
  static_assert(kC * kC / 8 == kThreads, "one item per thread");
  {  // item: row i, columns j .. j + 7 (one 16-byte chunk); threads 4 .. 7 of each 8 read their second float4
     // first, so that the 8 threads of a 128-bit shared load cover 32 distinct banks
    const int i = tid >> 3, j = 8 * (tid & 7), h0 = 4 * ((tid >> 2) & 1);
    uint4 w = make_uint4(0u, 0u, 0u, 0u);  // blocks above the diagonal: never written
    if ((j >> 4) <= (i >> 4)) {
      const float4 t0 = *reinterpret_cast<const float4*>(sT + i * LDA + j + h0);
      const float4 b0 = *reinterpret_cast<const float4*>(sBeta + j + h0);
      const float4 t1 = *reinterpret_cast<const float4*>(sT + i * LDA + j + (4 ^ h0));
      const float4 b1 = *reinterpret_cast<const float4*>(sBeta + j + (4 ^ h0));
      const uint32_t p0 = pack_bf16(t0.x * b0.x, t0.y * b0.y), p1 = pack_bf16(t0.z * b0.z, t0.w * b0.w);
      const uint32_t p2 = pack_bf16(t1.x * b1.x, t1.y * b1.y), p3 = pack_bf16(t1.z * b1.z, t1.w * b1.w);
      w = h0 ? make_uint4(p2, p3, p0, p1) : make_uint4(p0, p1, p2, p3);
    }
    stg128(p.scr.tb + cid * (kC * kC) + scr_tile_off<kC>(i, j), w);
  }
}

}  // namespace kimi::cuda::kda_chunk
