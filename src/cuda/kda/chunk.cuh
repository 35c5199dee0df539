// src/cuda/kda/chunk.cuh: chunkwise KDA forward (prefill) on tensor cores, SPEC 5 / 5.1.
//
// Grid: one CTA per (sequence, head, V tile); NV = D / VT V tiles (1 or 2, launcher heuristic). Each CTA walks
// its sequence in chunks of C = 64 rows, holding the fp32 state slice S[:, V tile] in shared memory, stored
// TRANSPOSED (S^T[v][k], k contiguous) so that it is directly the k-contiguous B operand of every product that
// reads it. 512 threads = 16 warps (the kernel is latency-bound: 16 warps ran 1.6x faster than 8 on the H200).
// A V-split CTA recomputes the V-independent A and T matrices of its head.
//
// Per chunk (rows beyond the sequence end are zero: q = k = v = 0, g = 0, beta = 0, so they neither decay
// nor update the state, and their outputs are not written):
//   P1  load q, k, raw g, beta of the 64 rows (all loads of a warp issued together); q, k stored RAW as bf16
//       (exact for bf16 inputs) with per-row fp32 multipliers mq = scale / ||q|| (or scale), mk = 1 / ||k||
//       (or 1), applied whenever an operand is formed, so q and k are rounded only once; gate -> g (fp32);
//       beta (sigmoid); G = inclusive cumsum of g over the chunk rows (fp32), GC = G[63], decay = exp(GC).
//       V rows are loaded into registers here too (stored to shared memory in P3).
//   P2a A_qk (lower incl. diagonal) and A_kk (strictly lower, * beta_i) in 16 x 16 blocks, mma.sync
//       m16n8k16 bf16 -> fp32. Row block a uses the reference R_a = G[16a - 1] (R_0 = 0):
//         row operand  q_i exp(G_i - R_a), k_i exp(G_i - R_a)   (i >= 16a: G_i <= R_a, exponent <= 0)
//         col operand  k_j exp(R_a - G_j)                       (j <  16a: G_j >= R_a, exponent <= 0)
//       (G is non-increasing because g <= 0). Diagonal blocks (j in block a):
//         kDiagMma (bounded gate, lower bound >= -5): the same factoring through R_a, col exponents in
//           [0, 80] (16 rows * 5): e^80 = 5.5e34 is finite in fp32 and bf16; the upper triangle (masked by a
//           select, never multiplied) stays below 128 * e^80 |q||k|, finite.
//         otherwise (softplus or a given g, unbounded): per pair, sum_d q_id k_jd exp(G_id - G_jd) with
//           i >= j (exponent <= 0) on CUDA cores in fp32.
//   P2b Qg = q exp(G), Kg = k exp(G) (bf16, exponents <= 0), KdT[k][t] = k_t exp(GC - G_t) (bf16, <= 0).
//   P3  V tile (bf16); T = (I + A_kk)^-1 in fp32 (forward substitution in the four 16 x 16 diagonal blocks,
//       one warp each, then block substitution T_ab = -T_aa sum_{m=b}^{a-1} L_am T_mb by distance a - b);
//       Tb = T diag(beta) in bf16.
//   P4  X = V - Kg S         (64 x VT, k = D; S split hi + lo bf16)             -> X^T as hi + lo bf16
//   P5  U = Tb X             (64 x VT, k = 64; X hi + lo)                       -> U^T as hi + lo bf16
//   P6  O = Qg S + A_qk U    (64 x VT; S hi + lo, U hi + lo) -> global o (rows inside the sequence)
//   P7  S^T <- S^T diag(exp(GC)) + U^T KdT^T   (VT x D, k = 64; U hi + lo; fp32 accumulators start from S)
//   All products: mma.sync.m16n8k16 bf16 x bf16 -> fp32. Numerics: S stays fp32 in shared memory and enters
//   the products as hi + lo bf16 (~16-bit operand, two mma), X and U likewise; the other operands (Qg, Kg,
//   KdT, A_qk, Tb, the A-matrix factors) are single bf16 (one rounding each, ~1e-3 relative RMS). Measured on
//   the H200 vs an fp64 recurrence (bf16 inputs and output, gate pre-activations and dt_bias over +-8, both
//   gate forms, T up to 65536): relative RMS error 3.0-3.6e-3 on o and 1.9-2.4e-3 on the final state, no
//   NaN/Inf (the bar is 5e-3; single-bf16 S/X/U gave 4.7e-3). f32 inputs get ~4e-3 too: this is NOT an
//   fp32-accurate path (the 1e-5 fp32 bar needs the recurrent kernel or an fp32 chunk path).
//
// Shared memory (bytes; D = 128, VT = 128 / 64): S^T fp32 [VT][D+8] 69632 / 34816; R1 (G fp32 [64][D], then
// T fp32 [64][68] + 3 scratch 16x16 blocks, then X^T hi and U^T hi bf16 [VT][72]) 36864 / 32768; R2 (q bf16
// [64][D+8], then V bf16 [64][VT+8], then U^T lo); R3 (k bf16, then Tb bf16 [64][72]); R4 (q' then Qg);
// R5 (k' then Kg); R6 (column operand [64][D+8], then KdT [D][72]); A_kk fp32 [64][68], then X^T lo;
// A_qk bf16 [64][72]; beta, GC, decay, mq, mk. Total 225024 (VT = 128) / 184064 (VT = 64) / 112896 (D = 64):
// one CTA per SM. Row pads of 16 bytes (bf16) and 32 bytes (fp32 S^T) make the mma fragment loads
// bank-conflict free.
//
// Profile (ncu, H200, 1 x 16384 H64, VT = 64): latency-bound, 0.48 issued warps per scheduler per cycle,
// ~30 us per chunk per CTA, dominated by the V-independent phases (P1 - P3: splitting V barely changes the
// chunk time). Next step for speed: compute P1 - P3 (A_qk, Tb, Qg, Kg, KdT, decay) for all chunks in a
// parallel pre-pass and keep only P4 - P7 in the sequential walk (FLA's structure), then wgmma.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#ifdef KIMI_KDA_CHUNK_DEBUG
#include <cassert>
#define KDA_CHUNK_ASSERT(x) assert(x)
#else
#define KDA_CHUNK_ASSERT(x) ((void)0)
#endif

namespace kimi::cuda::kda_chunk {

using bf16 = __nv_bfloat16;

constexpr int kC = 64;  // chunk rows
constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;

// Storage dtypes (== int(kimi::DType::...), checked by static_assert in chunk.cu).
enum : int { kDtF32 = 0, kDtBf16 = 1, kDtF16 = 2 };
enum : int { kGateNone = 0, kGateBounded = 1, kGateSoftplus = 2 };

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
  const int64_t* cu;  // device offsets [N + 1] or null
  int64_t T;
  int H, N;
};

template <int D, int VT>
struct Smem {
  static constexpr int LDB = D + 8;   // bf16 [64][D] operands
  static constexpr int LDT = kC + 8;  // bf16 [*][64] operands
  static constexpr int LDS = D + 8;   // fp32 S^T [VT][D]
  static constexpr int LDA = kC + 4;  // fp32 [64][64]
  static constexpr int LDV = VT + 8;  // bf16 V tile [64][VT]
  static constexpr size_t mx(size_t a, size_t b) { return a > b ? a : b; }
  static constexpr size_t kS = size_t(VT) * LDS * 4;
  static constexpr size_t kTf = size_t(kC) * LDA * 4;
  static constexpr size_t kR1 = mx(mx(size_t(kC) * D * 4, kTf + 3 * 256 * 4), 2 * size_t(VT) * LDT * 2);
  static constexpr size_t kRB = size_t(kC) * LDB * 2;
  static constexpr size_t kR2 = mx(kRB, size_t(VT) * LDT * 2);     // q, then V, then U^T lo
  static constexpr size_t kAkk = mx(kTf, size_t(VT) * LDT * 2);    // A_kk fp32, then X^T lo
  static constexpr size_t kR6 = mx(kRB, size_t(D) * LDT * 2);
  static constexpr size_t S = 0;
  static constexpr size_t R1 = S + kS;
  static constexpr size_t R2 = R1 + kR1;
  static constexpr size_t R3 = R2 + kR2;
  static constexpr size_t R4 = R3 + kRB;
  static constexpr size_t R5 = R4 + kRB;
  static constexpr size_t R6 = R5 + kRB;
  static constexpr size_t AKK = R6 + kR6;
  static constexpr size_t AQK = AKK + kAkk;
  static constexpr size_t BETA = AQK + size_t(kC) * LDT * 2;
  static constexpr size_t GC = BETA + kC * 4;
  static constexpr size_t DECAY = GC + D * 4;
  static constexpr size_t MQ = DECAY + D * 4;
  static constexpr size_t MK = MQ + kC * 4;
  static constexpr size_t TOTAL = MK + kC * 4;
  static_assert(D % 32 == 0 && VT % 32 == 0 && VT <= D && D % VT == 0, "tile shapes");
  static_assert(size_t(kC) * LDV * 2 <= kRB, "V tile fits R2");
  static_assert(size_t(kC) * LDT * 2 <= kRB, "Tb fits R3");
  static_assert(R1 % 16 == 0 && R2 % 16 == 0 && R3 % 16 == 0 && R4 % 16 == 0 && R5 % 16 == 0 && R6 % 16 == 0 &&
                    AKK % 16 == 0 && AQK % 16 == 0 && BETA % 16 == 0 && GC % 16 == 0 && DECAY % 16 == 0,
                "16-byte aligned regions");
  static_assert(TOTAL <= 227 * 1024, "fits the sm_90 shared memory of one CTA");
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

__device__ __forceinline__ float u16_to_f32(uint32_t h, int dt) {
  return dt == kDtBf16 ? __uint_as_float(h << 16) : __half2float(__ushort_as_half(static_cast<unsigned short>(h)));
}

// N consecutive elements (N in {1, 2, 4}) of a float tensor of runtime dtype dt at element offset off.
template <int N>
__device__ __forceinline__ void load_n(const void* base, int dt, int64_t off, float (&x)[N]) {
  if (dt == kDtF32) {
    const float* p = static_cast<const float*>(base) + off;
    if (N == 4 && (reinterpret_cast<uintptr_t>(p) & 15) == 0) {
      const float4 u = *reinterpret_cast<const float4*>(p);
      const float w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
      for (int e = 0; e < N; ++e) x[e] = w[e];
    } else if (N == 2 && (reinterpret_cast<uintptr_t>(p) & 7) == 0) {
      const float2 u = *reinterpret_cast<const float2*>(p);
      const float w[2] = {u.x, u.y};
#pragma unroll
      for (int e = 0; e < N; ++e) x[e] = w[e];
    } else {
#pragma unroll
      for (int e = 0; e < N; ++e) x[e] = p[e];
    }
  } else {
    const unsigned short* p = static_cast<const unsigned short*>(base) + off;
    if (N == 4 && (reinterpret_cast<uintptr_t>(p) & 7) == 0) {
      const uint2 u = *reinterpret_cast<const uint2*>(p);
      const uint32_t w[4] = {u.x & 0xffffu, u.x >> 16, u.y & 0xffffu, u.y >> 16};
#pragma unroll
      for (int e = 0; e < N; ++e) x[e] = u16_to_f32(w[e], dt);
    } else if (N == 2 && (reinterpret_cast<uintptr_t>(p) & 3) == 0) {
      const uint32_t u = *reinterpret_cast<const uint32_t*>(p);
      const uint32_t w[2] = {u & 0xffffu, u >> 16};
#pragma unroll
      for (int e = 0; e < N; ++e) x[e] = u16_to_f32(w[e], dt);
    } else {
#pragma unroll
      for (int e = 0; e < N; ++e) x[e] = u16_to_f32(p[e], dt);
    }
  }
}

__device__ __forceinline__ float load_1(const void* base, int dt, int64_t off) {
  float x[1];
  load_n<1>(base, dt, off, x);
  return x[0];
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

// acc[i][j] += A[m0 + 16 i .. +16][0..KD) * Bt[n0 + 8 j .. +8][0..KD)^T for one warp.
// A: bf16 row-major [m][k] (lda elements); Bt: [n][k] row-major (ldb elements).
// BM = kBbf16: Bt bf16.  BM = kBf32: Bt fp32, split on the fly into bf16 hi + lo (two mma, ~16-bit operand).
// BM = kBpair: Bt given as two bf16 arrays hi (Bt) + lo (Bt_lo), two mma.  kAlo: A given as hi (A) + lo
// (A_lo), one more mma per fragment.
// Fragments of mma.m16n8k16 (g = lane / 4, t = lane % 4): a0 = A[g][2t..], a1 = A[g+8][2t..],
// a2 = A[g][2t+8..], a3 = A[g+8][2t+8..]; b0 = Bt[g][2t..], b1 = Bt[g][2t+8..];
// c0, c1 = C[g][2t, 2t+1], c2, c3 = C[g+8][2t, 2t+1].
enum : int { kBbf16 = 0, kBf32 = 1, kBpair = 2 };

template <int MT, int NT, int KD, int BM, bool kAlo = false>
__device__ __forceinline__ void warp_mma(float (&acc)[MT][NT][4], const bf16* A, int lda, int m0, const void* Bt,
                                         int ldb, int n0, int lane, const bf16* A_lo = nullptr,
                                         const bf16* Bt_lo = nullptr) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int k0 = 0; k0 < KD; k0 += 16) {
    uint32_t a[MT][4], b[NT][2];
    [[maybe_unused]] uint32_t al[MT][4], bl[NT][2];
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      const int o = (m0 + 16 * i + g) * lda + k0 + 2 * t;
      a[i][0] = lds32(A + o);
      a[i][1] = lds32(A + o + 8 * lda);
      a[i][2] = lds32(A + o + 8);
      a[i][3] = lds32(A + o + 8 * lda + 8);
      if constexpr (kAlo) {
        al[i][0] = lds32(A_lo + o);
        al[i][1] = lds32(A_lo + o + 8 * lda);
        al[i][2] = lds32(A_lo + o + 8);
        al[i][3] = lds32(A_lo + o + 8 * lda + 8);
      }
    }
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int o = (n0 + 8 * j + g) * ldb + k0 + 2 * t;
      if constexpr (BM == kBf32) {
        const float* pb = static_cast<const float*>(Bt) + o;
        const float2 x0 = *reinterpret_cast<const float2*>(pb);
        const float2 x1 = *reinterpret_cast<const float2*>(pb + 8);
        b[j][0] = pack_bf16(x0.x, x0.y);
        b[j][1] = pack_bf16(x1.x, x1.y);
        bl[j][0] = pack_bf16(x0.x - bf_lo(b[j][0]), x0.y - bf_hi(b[j][0]));
        bl[j][1] = pack_bf16(x1.x - bf_lo(b[j][1]), x1.y - bf_hi(b[j][1]));
      } else {
        const bf16* pb = static_cast<const bf16*>(Bt) + o;
        b[j][0] = lds32(pb);
        b[j][1] = lds32(pb + 8);
        if constexpr (BM == kBpair) {
          bl[j][0] = lds32(Bt_lo + o);
          bl[j][1] = lds32(Bt_lo + o + 8);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        mma_bf16(acc[i][j], a[i], b[j]);
        if constexpr (BM != kBbf16) mma_bf16(acc[i][j], a[i], bl[j]);
        if constexpr (kAlo) mma_bf16(acc[i][j], al[i], b[j]);
      }
  }
}

// ---------------------------------------------------------------------------------------------------------
// the kernel

template <int D, int VT, bool kDiagMma>
__global__ void __launch_bounds__(kThreads, 1) kda_chunk_kernel(const Params p) {
  using L = Smem<D, VT>;
  constexpr int NV = D / VT;
  constexpr int LDB = L::LDB, LDT = L::LDT, LDS = L::LDS, LDA = L::LDA, LDV = L::LDV;
  constexpr int EPL = D / 32;   // channels per lane in row loads
  constexpr int EPV = VT / 32;  // V columns per lane in row loads
  extern __shared__ __align__(16) unsigned char smem[];
  float* const sS = reinterpret_cast<float*>(smem + L::S);     // S^T [VT][LDS] fp32
  float* const sG = reinterpret_cast<float*>(smem + L::R1);    // G [64][D] fp32      (P1 - P2b)
  float* const sT = reinterpret_cast<float*>(smem + L::R1);    // T [64][LDA] fp32    (P3)
  float* const sP = reinterpret_cast<float*>(smem + L::R1 + L::kTf);  // 3 x [16][16] scratch (P3)
  bf16* const sXt = reinterpret_cast<bf16*>(smem + L::R1);     // X^T [VT][LDT]       (P4 - P5)
  bf16* const sUt = reinterpret_cast<bf16*>(smem + L::R1 + size_t(VT) * LDT * 2);  // U^T [VT][LDT] (P5 - P7)
  bf16* const sQn = reinterpret_cast<bf16*>(smem + L::R2);     // q normalized, scaled (P1 - P2b)
  bf16* const sV = reinterpret_cast<bf16*>(smem + L::R2);      // V tile [64][LDV]    (P3 - P4)
  bf16* const sUl = reinterpret_cast<bf16*>(smem + L::R2);     // U^T lo [VT][LDT]    (P5 - P7)
  bf16* const sXl = reinterpret_cast<bf16*>(smem + L::AKK);    // X^T lo [VT][LDT]    (P4 - P5)
  bf16* const sKn = reinterpret_cast<bf16*>(smem + L::R3);     // k normalized        (P1 - P2b)
  bf16* const sTb = reinterpret_cast<bf16*>(smem + L::R3);     // T diag(beta) [64][LDT] (P3 - P5)
  bf16* const sQr = reinterpret_cast<bf16*>(smem + L::R4);     // q' (P2a), then Qg (P2b - P6)
  bf16* const sKr = reinterpret_cast<bf16*>(smem + L::R5);     // k' (P2a), then Kg (P2b - P4)
  bf16* const sKc = reinterpret_cast<bf16*>(smem + L::R6);     // column operand (P2a), then KdT [D][LDT]
  float* const sAkk = reinterpret_cast<float*>(smem + L::AKK);  // A_kk [64][LDA] fp32 (beta applied)
  bf16* const sAqk = reinterpret_cast<bf16*>(smem + L::AQK);   // A_qk [64][LDT] bf16 (upper zero)
  float* const sBeta = reinterpret_cast<float*>(smem + L::BETA);
  float* const sGC = reinterpret_cast<float*>(smem + L::GC);
  float* const sDecay = reinterpret_cast<float*>(smem + L::DECAY);
  float* const sMq = reinterpret_cast<float*>(smem + L::MQ);  // per-row multiplier of the raw q: norm * scale
  float* const sMk = reinterpret_cast<float*>(smem + L::MK);  // per-row multiplier of the raw k: norm

  KDA_CHUNK_ASSERT(blockDim.x == kThreads);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int gq = lane >> 2, tq = lane & 3;  // mma fragment coordinates

  const int bid = int(blockIdx.x);
  const int vt = bid % NV;
  const int h = (bid / NV) % p.H;
  const int n = bid / (NV * p.H);
  KDA_CHUNK_ASSERT(n < p.N);
  int64_t bb, bos, len;
  if (p.cu) {
    bb = 0;
    bos = p.cu[n];
    len = p.cu[n + 1] - bos;
  } else {
    bb = n;
    bos = 0;
    len = p.T;
  }
  const int v0 = vt * VT;

  // per-lane gate constants (lane owns channels lane*EPL .. +EPL in row loads)
  float gate_a = 0.f, dtb[EPL];
#pragma unroll
  for (int e = 0; e < EPL; ++e) dtb[e] = 0.f;
  if (p.gate != kGateNone) {
    gate_a = expf(p.A_log[h * p.s_A]);
#pragma unroll
    for (int e = 0; e < EPL; ++e) dtb[e] = p.dt_bias[int64_t(h) * D + lane * EPL + e];
  }

  // initial state slice -> S^T
  const int64_t sbase = (int64_t(n) * p.H + h) * int64_t(D) * D;
  for (int e = tid; e < VT * D; e += kThreads) {
    int v, kk;
    int64_t gi;
    if (p.vk) {
      v = e / D;
      kk = e % D;
      gi = sbase + int64_t(v0 + v) * D + kk;
    } else {
      kk = e / VT;
      v = e % VT;
      gi = sbase + int64_t(kk) * D + v0 + v;
    }
    sS[v * LDS + kk] = p.s0 ? p.s0[gi] : 0.f;
  }
  for (int e = tid; e < kC * LDT; e += kThreads) sAqk[e] = __float2bfloat16_rn(0.f);  // upper blocks stay 0
  __syncthreads();

  for (int64_t c0 = 0; c0 < len; c0 += kC) {
    const int nrows = int(len - c0 < kC ? len - c0 : kC);

    // ---- P1: rows -> q, k (bf16), g (fp32), beta --------------------------------------------------------
    // All loads of the warp's 8 rows are issued first (one memory latency per chunk, not 24).
    {
      constexpr int RW = kC / kWarps;  // rows per warp: r = warp + kWarps * rr
      const int ch = lane * EPL;
      float xq[RW][EPL], xk[RW][EPL], xg[RW][EPL], xb[RW];
#pragma unroll
      for (int rr = 0; rr < RW; ++rr) {
        const int r = warp + kWarps * rr;
        const int64_t tok = bos + c0 + r;
        xb[rr] = 0.f;
        if (r < nrows) {
          load_n<EPL>(p.q, p.dt_q, bb * p.s_q[0] + tok * p.s_q[1] + h * p.s_q[2] + ch, xq[rr]);
          load_n<EPL>(p.k, p.dt_k, bb * p.s_k[0] + tok * p.s_k[1] + h * p.s_k[2] + ch, xk[rr]);
          load_n<EPL>(p.g, p.dt_g, bb * p.s_g[0] + tok * p.s_g[1] + h * p.s_g[2] + ch, xg[rr]);
          if (lane == 0) xb[rr] = load_1(p.beta, p.dt_beta, bb * p.s_beta[0] + tok * p.s_beta[1] + h * p.s_beta[2]);
        } else {
#pragma unroll
          for (int e = 0; e < EPL; ++e) xq[rr][e] = xk[rr][e] = xg[rr][e] = 0.f;
        }
      }
#pragma unroll
      for (int rr = 0; rr < RW; ++rr) {
        const int r = warp + kWarps * rr;
        const bool valid = r < nrows;
        float mq = p.scale, mk = 1.f;
        if (p.l2norm) {
          float sq = 0.f, sk = 0.f;
#pragma unroll
          for (int e = 0; e < EPL; ++e) {
            sq += xq[rr][e] * xq[rr][e];
            sk += xk[rr][e] * xk[rr][e];
          }
          sq = warp_sum(sq);
          sk = warp_sum(sk);
          mq *= 1.f / sqrtf(sq + 1e-6f);
          mk = 1.f / sqrtf(sk + 1e-6f);
        }
#pragma unroll
        for (int e = 0; e < EPL; e += 2) {  // raw values (exact for bf16 inputs); multipliers applied later
          sts32(sQn + r * LDB + ch + e, pack_bf16(xq[rr][e], xq[rr][e + 1]));
          sts32(sKn + r * LDB + ch + e, pack_bf16(xk[rr][e], xk[rr][e + 1]));
        }
#pragma unroll
        for (int e = 0; e < EPL; ++e) {
          float gv = xg[rr][e];
          if (p.gate != kGateNone && valid) {
            const float x = xg[rr][e] + dtb[e];
            if (p.gate == kGateSoftplus)
              gv = -gate_a * (x > 20.f ? x : log1pf(expf(x)));
            else
              gv = p.lb / (1.f + expf(-gate_a * x));
          }
          sG[r * D + ch + e] = valid ? gv : 0.f;
        }
        if (lane == 0) {
          float bv = xb[rr];
          if (valid && p.beta_sigmoid) bv = 1.f / (1.f + expf(-bv));
          sBeta[r] = valid ? bv : 0.f;
          sMq[r] = mq;
          sMk[r] = mk;
        }
      }
    }
    __syncthreads();

    // cumsum over rows per channel: TPC threads per channel, RPT rows each
    {
      constexpr int TPC = kThreads / D, RPT = kC / TPC;
      const int c = tid % D, part = tid / D;
      float run = 0.f;
#pragma unroll
      for (int r = 0; r < kC - RPT; ++r)
        if (r < part * RPT) run += sG[r * D + c];
      __syncthreads();
#pragma unroll 8
      for (int r = part * RPT; r < part * RPT + RPT; ++r) {
        run += sG[r * D + c];
        sG[r * D + c] = run;
      }
      if (part == TPC - 1) {
        sGC[c] = run;
        sDecay[c] = expf(run);
      }
    }
    __syncthreads();

    // V tile rows into registers now (stored to shared memory in P3, once R2 is free): hides the latency
    constexpr int RWV = kC / kWarps;
    float xv[RWV][EPV];
#pragma unroll
    for (int rr = 0; rr < RWV; ++rr) {
      const int r = warp + kWarps * rr;
      if (r < nrows) {
        const int64_t tok = bos + c0 + r;
        load_n<EPV>(p.v, p.dt_v, bb * p.s_v[0] + tok * p.s_v[1] + h * p.s_v[2] + v0 + lane * EPV, xv[rr]);
      } else {
#pragma unroll
        for (int e = 0; e < EPV; ++e) xv[rr][e] = 0.f;
      }
    }

    // ---- P2a: A_qk, A_kk --------------------------------------------------------------------------------
    // row operands q' = q exp(G_i - R_a), k' = k exp(G_i - R_a), a = i / 16, R_0 = 0, R_a = G[16a - 1]
    for (int e = tid; e < kC * D / 2; e += kThreads) {
      const int r = e / (D / 2), c = 2 * (e % (D / 2)), a = r >> 4;
      const float2 gg = *reinterpret_cast<const float2*>(sG + r * D + c);
      const float2 R = a ? *reinterpret_cast<const float2*>(sG + (16 * a - 1) * D + c) : make_float2(0.f, 0.f);
      const float e0 = __expf(gg.x - R.x), e1 = __expf(gg.y - R.y);
      const float mq = sMq[r], mk = sMk[r];
      const uint32_t uq = lds32(sQn + r * LDB + c), uk = lds32(sKn + r * LDB + c);
      sts32(sQr + r * LDB + c, pack_bf16(bf_lo(uq) * mq * e0, bf_hi(uq) * mq * e1));
      sts32(sKr + r * LDB + c, pack_bf16(bf_lo(uk) * mk * e0, bf_hi(uk) * mk * e1));
    }
#pragma unroll 1
    for (int a = kDiagMma ? 0 : 1; a < 4; ++a) {
      const int ncol = kDiagMma ? 16 * a + 16 : 16 * a;
      // column operand k_j exp(R_a - G_j), j < ncol (<= 0 for j < 16a; in [0, 80] on the diagonal block)
      for (int e = tid; e < ncol * (D / 2); e += kThreads) {
        const int j = e / (D / 2), c = 2 * (e % (D / 2));
        const float2 gg = *reinterpret_cast<const float2*>(sG + j * D + c);
        const float2 R = a ? *reinterpret_cast<const float2*>(sG + (16 * a - 1) * D + c) : make_float2(0.f, 0.f);
        const float e0 = __expf(R.x - gg.x), e1 = __expf(R.y - gg.y);
        const float mk = sMk[j];
        const uint32_t uk = lds32(sKn + j * LDB + c);
        sts32(sKc + j * LDB + c, pack_bf16(bf_lo(uk) * mk * e0, bf_hi(uk) * mk * e1));
      }
      __syncthreads();
      const int nb = kDiagMma ? a + 1 : a;  // column blocks b < nb
      for (int tile = warp; tile < 4 * nb; tile += kWarps) {
        const int mat = tile & 1, half = (tile >> 1) & 1, b = tile >> 2;
        float acc[1][1][4] = {};
        warp_mma<1, 1, D, kBbf16>(acc, mat ? sKr : sQr, LDB, 16 * a, sKc, LDB, 16 * b + 8 * half, lane);
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) {
          const int i = 16 * a + gq + 8 * rr;
#pragma unroll
          for (int cc = 0; cc < 2; ++cc) {
            const int j = 16 * b + 8 * half + 2 * tq + cc;
            const float val = acc[0][0][2 * rr + cc];
            if (mat == 0)
              sAqk[i * LDT + j] = __float2bfloat16_rn(j <= i ? val : 0.f);
            else
              sAkk[i * LDA + j] = j < i ? val * sBeta[i] : 0.f;
          }
        }
      }
      __syncthreads();
    }
    if constexpr (!kDiagMma) {
      // diagonal 16 x 16 blocks per pair: exp(G_i - G_j), i >= j, exponent <= 0 (any g <= 0)
      for (int e = tid; e < 4 * 256; e += kThreads) {
        const int a = e >> 8, i = (e >> 4) & 15, j = e & 15;
        const int I = 16 * a + i, J = 16 * a + j;
        float sq = 0.f, sk = 0.f;
        if (j <= i) {
#pragma unroll 4
          for (int c = 0; c < D; c += 2) {
            const float2 gi = *reinterpret_cast<const float2*>(sG + I * D + c);
            const float2 gj = *reinterpret_cast<const float2*>(sG + J * D + c);
            const float e0 = __expf(gi.x - gj.x), e1 = __expf(gi.y - gj.y);
            const uint32_t uq = lds32(sQn + I * LDB + c), uki = lds32(sKn + I * LDB + c),
                           ukj = lds32(sKn + J * LDB + c);
            const float kj0 = bf_lo(ukj) * e0, kj1 = bf_hi(ukj) * e1;
            sq += bf_lo(uq) * kj0 + bf_hi(uq) * kj1;
            sk += bf_lo(uki) * kj0 + bf_hi(uki) * kj1;
          }
        }
        sAqk[I * LDT + J] = __float2bfloat16_rn(sq * sMq[I] * sMk[J]);  // 0 above the diagonal
        sAkk[I * LDA + J] = j < i ? sk * sMk[I] * sMk[J] * sBeta[I] : 0.f;
      }
    }

    // ---- P2b: Qg, Kg, KdT (R4 - R6 are free: the last P2a barrier is behind us) ---------------------------
    for (int e = tid; e < kC * D / 2; e += kThreads) {
      const int r = e / (D / 2), c = 2 * (e % (D / 2));
      const float2 gg = *reinterpret_cast<const float2*>(sG + r * D + c);
      const float mq = sMq[r], mk = sMk[r];
      const float e0 = __expf(gg.x), e1 = __expf(gg.y);
      const uint32_t uq = lds32(sQn + r * LDB + c), uk = lds32(sKn + r * LDB + c);
      sts32(sQr + r * LDB + c, pack_bf16(bf_lo(uq) * mq * e0, bf_hi(uq) * mq * e1));
      sts32(sKr + r * LDB + c, pack_bf16(bf_lo(uk) * mk * e0, bf_hi(uk) * mk * e1));
    }
    for (int e = tid; e < D * (kC / 2); e += kThreads) {  // consecutive threads: consecutive channels
      const int c = e % D, r = 2 * (e / D);
      const float gc = sGC[c];
      const float e0 = __expf(gc - sG[r * D + c]) * sMk[r], e1 = __expf(gc - sG[(r + 1) * D + c]) * sMk[r + 1];
      sts32(sKc + c * LDT + r, pack_bf16(bf2f(sKn[r * LDB + c]) * e0, bf2f(sKn[(r + 1) * LDB + c]) * e1));
    }
    __syncthreads();

    // ---- P3: V tile; T = (I + A_kk)^-1; Tb = T diag(beta) -------------------------------------------------
#pragma unroll
    for (int rr = 0; rr < RWV; ++rr)
#pragma unroll
      for (int e = 0; e < EPV; ++e)
        sV[(warp + kWarps * rr) * LDV + lane * EPV + e] = __float2bfloat16_rn(xv[rr][e]);
    if (warp < 4 && lane < 16) {  // diagonal blocks: forward substitution, lane = column j of block warp
      const int base = 16 * warp, j = lane;
      float col[16];
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        float val = i == j ? 1.f : 0.f;
#pragma unroll
        for (int m = 0; m < i; ++m) val -= sAkk[(base + i) * LDA + base + m] * col[m];
        col[i] = val;
      }
#pragma unroll
      for (int i = 0; i < 16; ++i) sT[(base + i) * LDA + base + j] = col[i];
    }
    __syncthreads();
#pragma unroll 1
    for (int d = 1; d < 4; ++d) {  // blocks (a, a - d): T_ab = -T_aa sum_{m=b}^{a-1} L_am T_mb
      const int nblk = 4 - d;
      for (int e = tid; e < nblk * 256; e += kThreads) {
        const int a = d + (e >> 8), b = a - d, i = (e >> 4) & 15, j = e & 15;
        float s = 0.f;
        for (int m = b; m < a; ++m)
#pragma unroll
          for (int x = 0; x < 16; ++x) s += sAkk[(16 * a + i) * LDA + 16 * m + x] * sT[(16 * m + x) * LDA + 16 * b + j];
        sP[(e >> 8) * 256 + i * 16 + j] = s;
      }
      __syncthreads();
      for (int e = tid; e < nblk * 256; e += kThreads) {
        const int a = d + (e >> 8), b = a - d, i = (e >> 4) & 15, j = e & 15;
        float s = 0.f;
#pragma unroll
        for (int x = 0; x < 16; ++x) s += sT[(16 * a + i) * LDA + 16 * a + x] * sP[(e >> 8) * 256 + x * 16 + j];
        sT[(16 * a + i) * LDA + 16 * b + j] = -s;
      }
      __syncthreads();
    }
    for (int e = tid; e < kC * kC; e += kThreads) {
      const int i = e >> 6, j = e & 63;
      const float val = (j >> 4) > (i >> 4) ? 0.f : sT[i * LDA + j] * sBeta[j];
      sTb[i * LDT + j] = __float2bfloat16_rn(val);
    }
    __syncthreads();

    constexpr int WM = kWarps / 4, MT = 4 / WM;  // WM x 4 warp grid; MT m16 tiles of the 64 rows per warp
    static_assert(WM * 4 == kWarps && MT * WM == 4, "warp grid");
    const int wm = warp >> 2, wn = warp & 3;
    constexpr int NT = VT / 32;               // n8 tiles per warp over VT / 4 columns
    // ---- P4: X = V - Kg S -> X^T ------------------------------------------------------------------------
    {
      float acc[MT][NT][4] = {};
      warp_mma<MT, NT, D, kBf32>(acc, sKr, LDB, (kC / WM) * wm, sS, LDS, wn * (VT / 4), lane);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int rr = 0; rr < 2; ++rr)
#pragma unroll
            for (int cc = 0; cc < 2; ++cc) {
              const int t = (kC / WM) * wm + 16 * mt + gq + 8 * rr, v = wn * (VT / 4) + 8 * nt + 2 * tq + cc;
              const float x = bf2f(sV[t * LDV + v]) - acc[mt][nt][2 * rr + cc];
              const bf16 xh = __float2bfloat16_rn(x);
              sXt[v * LDT + t] = xh;
              sXl[v * LDT + t] = __float2bfloat16_rn(x - bf2f(xh));
            }
    }
    __syncthreads();
    // ---- P5: U = Tb X -> U^T ----------------------------------------------------------------------------
    {
      float acc[MT][NT][4] = {};
      warp_mma<MT, NT, kC, kBpair>(acc, sTb, LDT, (kC / WM) * wm, sXt, LDT, wn * (VT / 4), lane, nullptr, sXl);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int rr = 0; rr < 2; ++rr)
#pragma unroll
            for (int cc = 0; cc < 2; ++cc) {
              const int t = (kC / WM) * wm + 16 * mt + gq + 8 * rr, v = wn * (VT / 4) + 8 * nt + 2 * tq + cc;
              const float u = acc[mt][nt][2 * rr + cc];
              const bf16 uh = __float2bfloat16_rn(u);
              sUt[v * LDT + t] = uh;
              sUl[v * LDT + t] = __float2bfloat16_rn(u - bf2f(uh));
            }
    }
    __syncthreads();
    // ---- P6: O = Qg S + A_qk U -> o -------------------------------------------------------------------
    {
      float acc[MT][NT][4] = {};
      warp_mma<MT, NT, D, kBf32>(acc, sQr, LDB, (kC / WM) * wm, sS, LDS, wn * (VT / 4), lane);
      warp_mma<MT, NT, kC, kBpair>(acc, sAqk, LDT, (kC / WM) * wm, sUt, LDT, wn * (VT / 4), lane, nullptr, sUl);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) {
          const int t = (kC / WM) * wm + 16 * mt + gq + 8 * rr;
          if (t < nrows) {
            const int64_t tok = bos + c0 + t;
            const int64_t ob = bb * p.s_o[0] + tok * p.s_o[1] + h * p.s_o[2] + v0;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
              const int v = wn * (VT / 4) + 8 * nt + 2 * tq;
              store_2(p.o, p.dt_o, ob + v, acc[mt][nt][2 * rr], acc[mt][nt][2 * rr + 1]);
            }
          }
        }
    }
    __syncthreads();
    // ---- P7: S^T <- S^T diag(exp(GC)) + U^T KdT^T ----------------------------------------------------------
    {
      constexpr int MT7 = VT / 16 / WM, NT7 = D / 32;
      static_assert(MT7 >= 1, "P7 tiles");
      const int m0 = wm * (VT / WM), n0 = wn * (D / 4);
      float acc[MT7][NT7][4];
#pragma unroll
      for (int mt = 0; mt < MT7; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT7; ++nt)
#pragma unroll
          for (int rr = 0; rr < 2; ++rr) {
            const int v = m0 + 16 * mt + gq + 8 * rr, kk = n0 + 8 * nt + 2 * tq;
            const float2 s = *reinterpret_cast<const float2*>(sS + v * LDS + kk);
            acc[mt][nt][2 * rr] = s.x * sDecay[kk];
            acc[mt][nt][2 * rr + 1] = s.y * sDecay[kk + 1];
          }
      warp_mma<MT7, NT7, kC, kBbf16, true>(acc, sUt, LDT, m0, sKc, LDT, n0, lane, sUl);
#pragma unroll
      for (int mt = 0; mt < MT7; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT7; ++nt)
#pragma unroll
          for (int rr = 0; rr < 2; ++rr) {
            const int v = m0 + 16 * mt + gq + 8 * rr, kk = n0 + 8 * nt + 2 * tq;
            *reinterpret_cast<float2*>(sS + v * LDS + kk) = make_float2(acc[mt][nt][2 * rr], acc[mt][nt][2 * rr + 1]);
          }
    }
    __syncthreads();
  }

  if (p.s1) {
    for (int e = tid; e < VT * D; e += kThreads) {
      int v, kk;
      int64_t gi;
      if (p.vk) {
        v = e / D;
        kk = e % D;
        gi = sbase + int64_t(v0 + v) * D + kk;
      } else {
        kk = e / VT;
        v = e % VT;
        gi = sbase + int64_t(kk) * D + v0 + v;
      }
      p.s1[gi] = sS[v * LDS + kk];
    }
  }
}

}  // namespace kimi::cuda::kda_chunk
