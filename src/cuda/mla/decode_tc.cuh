// src/cuda/mla/decode_tc.cuh: the attend step of mla_decode (absorbed form, SPEC 6, kimi/ops/mla.h) on bf16 tensor
// cores (mma.sync m16n8k16, f32 accumulate): split-K flash decoding over the latent cache, all heads of a sequence
// (up to 64; more in head groups of <= 64) per CTA, so each cache row is read from memory once per call (per group:
// the groups of a tile are neighbouring CTAs, the second read mostly hits L2). The absorb before it and the merge /
// project after it are decode_proj.cuh's kernels; this kernel writes the same partials as decode.cuh's FFMA attend.
//
// Math. Per sequence n (cache row slots[n], rows [0, len)), head h, absorbed query QL[n, h] = [q_lat | q_pe] (bf16,
// rounded from f32 by the absorb), cache row j = C_j = [c_j | k_pe_j] (RP = R + P wide):
//   score_hj = (QL_h . bf16(C_j)) * scale      (f32 accumulate: k-step q of 16 columns into sum q % KC; KC = 4
//                                               where a warp has one score block (MB <= 2), else 2;
//                                               the sums added as (s0 + s1) + (s2 + s3))
//   split s owns rows [row0, row1); online softmax over its tiles of kTcTJ rows, per head:
//     m' = max(m, max_j score_hj);  p_hj = bf16(exp(score_hj - m'));  alpha = exp(m - m')
//     l = l alpha + sum_j p_hj;   O_h = O_h alpha + sum_j p_hj bf16(c_j)   [R]  (f32 accumulate)
//   Opart[n, s, h] = O_h (unnormalised), ML[n, s, h] = (m, l): the merge's input (decode_proj.cuh). l sums the rounded
//   p that multiply the rows, so the normalisation matches the weighted sum.
//
// Splits. Grid (G, S, N), G = ceil(H / HG) head groups of HG <= 64 heads (decode_plan.h tc_decode_plan). Sequence n's
// rows are cut into S nearly equal runs of whole tiles from its own length (read on
// the device): tps = ceil(ceil(len / kTcTJ) / S) tiles per split, split s owns rows [s tps kTcTJ, ...) clipped to
// len; splits past the end write m = -inf, l = 0, O = 0 (the merge adds zeros for them). The host picks S (mla.cu).
//
// Tiling (kTcThreads = 256 = 8 warps, HP = 16 MB query rows = the group's heads padded with zero rows, MB 1..4):
//   shared: Qs   bf16 [HP][KP + 8]          KP = RP rounded up to 16, columns >= RP zero (the absorb's padding),
//                                        rows >= the group's heads zero (cp.async zero fill)
//           Cs   T    [STAGES][kTcTJ][KP + 8] cache tiles as stored (f32 or bf16), cp.async 16-byte chunks
//                                        (rows 16-byte aligned) or element loads; columns >= RP and rows past row1 zero
//           Ps   bf16 [HP][kTcTJ + 8]      the tile's p
//           red  f32  [HP][4], sum f32 [HP][4]  per-warp-column partial row max / row sum of the tile
//           m    f32  [2][HP] (by tile parity), l f32 [HP]
//   scores: warp w computes NP m16n8 blocks over KP: MB <= 2: m-blocks w / 4 + 2 i < MB, n-block w % 4 (one C
//           fragment per k-step serves them); MB >= 3: m-block w % 4 (< MB), n-blocks 2 (w / 4) + {0, 1} (one Q
//           fragment serves both: a fifth fewer shared-memory reads than two m-blocks per warp at 64 heads).
//           A = Qs rows (ldmatrix x4), B = Cs rows (bf16: one ldmatrix x4 per n-block for two k-steps; f32: 32-bit
//           pairs per lane, rounded to bf16 here); k-steps spread over KC accumulators (independent mma chains).
//   softmax: row max of the warp's 8 columns -> red, barrier, p -> Ps (bf16) and row sums -> sum, barrier.
//   P x C:  warp w owns the latent n-blocks 16 (i / 2) + 2 w + i % 2 (i < RN; R <= 64 RN) for all HP rows: A = Ps
//           (ldmatrix x4), B = Cs[j][r] along j (bf16: ldmatrix x4 .trans, two n-blocks; f32: element pairs);
//           accumulators O [MB][RN][4] f32 in registers.
//   pipeline: STAGES cache tiles in flight (cp.async groups; the queries ride in the first group), one barrier per
//           tile before its use.
// Launch (pdl.cuh, programmatic after the absorb): the index (host table or the caller's device lens / slots,
//   range-checked here) and the first tiles' copies before pdl_wait (the cache and the index are written by earlier
//   steps, complete once this grid may start: the absorb triggers its dependents after its own wait), the queries,
//   partials and state after it.
// Invariants: every tile has >= 1 valid row, so m' is finite after a tile; masked scores give p = 0 exactly; zero
//   padding (heads >= H, columns >= RP, rows >= row1) never reaches the outputs. Fixed reduction order everywhere, no
//   atomics: bit-identical replays.
// Precision: bf16 operands (QL, cache values, p) with f32 accumulation; the error budget is docs/ops/mla.md "CUDA
//   decode" (the bf16 harness bar, relative RMS <= 5e-3). f32 callers that need the 1e-5 bar take decode.cuh.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "cuda/index.cuh"
#include "cuda/pdl.cuh"

namespace kimi::cuda::mla {

inline constexpr int kTcTJ = 32, kTcThreads = 256, kTcMaxHG = 64, kTcMaxR = 512;

// Cache tiles in flight: 2 f32 tiles or 4 bf16 tiles (the same bytes).
template <class T>
inline constexpr int kTcStages = sizeof(T) == 4 ? 2 : 4;

struct TcParams {
  const __nv_bfloat16* QL;  // [N, H, KP] bf16, columns >= RP zero (decode_proj.cuh's absorb)
  const void* cache;
  int64_t c_s0, c_s1;    // element strides of the cache's slot and row dimensions
  const int64_t* lens;   // [N] (host-built table), or null: dlens / dslots below
  const int64_t* slots;  // [N]
  DevIndex dlens, dslots;  // the device form (lens null): a length outside [1, L] or a slot outside [0, Nc) -> 0 rows
  int64_t Nc, L;
  float* Opart;          // [N, S, H, R]
  float* ML;             // [N, S, H, 2]
  int H, HG, R, RP, S;  // heads, heads per group (<= 64)
  int vec;  // 1: cache rows are 16-byte aligned (cp.async), 0: element loads
  float scale;
};

__host__ __device__ inline int tc_kp(int rp) { return (rp + 15) / 16 * 16; }
__host__ __device__ inline int tc_ld(int rp) { return tc_kp(rp) + 8; }  // Qs and Cs row stride (elements)
inline constexpr int kTcLdp = kTcTJ + 8;                                  // Ps row stride (bf16)

// Shared memory layout (byte offsets), host and device.
struct TcSmem {
  size_t qs, cs, ps, red, sum, m, l, total;
  __host__ __device__ TcSmem(int hp, int rp, int stages, int esz) {
    const size_t ld = size_t(tc_ld(rp));
    qs = 0;
    cs = qs + size_t(hp) * ld * 2;
    ps = cs + size_t(stages) * kTcTJ * ld * size_t(esz);
    red = ps + size_t(hp) * kTcLdp * 2;
    sum = red + size_t(hp) * 4 * 4;
    m = sum + size_t(hp) * 4 * 4;
    l = m + size_t(2) * hp * 4;
    total = l + size_t(hp) * 4;
  }
};

__device__ __forceinline__ uint32_t tc_smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ uint32_t tc_pack(float lo, float hi) {  // lo in the low half (the lower column / row)
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
__device__ __forceinline__ float tc_f(float x) { return x; }
__device__ __forceinline__ float tc_f(__nv_bfloat16 x) { return __bfloat162float(x); }
// The bf16 pair (p[0], p[1]) of a row (p 4-byte aligned for bf16, 8-byte for f32), packed for an mma operand.
__device__ __forceinline__ uint32_t tc_pair(const float* p) {
  const float2 v = *reinterpret_cast<const float2*>(p);
  return tc_pack(v.x, v.y);
}
__device__ __forceinline__ uint32_t tc_pair(const __nv_bfloat16* p) { return *reinterpret_cast<const uint32_t*>(p); }
__device__ __forceinline__ void tc_zero(float& x) { x = 0.f; }
__device__ __forceinline__ void tc_zero(__nv_bfloat16& x) { x = __float2bfloat16_rn(0.f); }
__device__ __forceinline__ float tc_bf16_round(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

__device__ __forceinline__ void tc_mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// A fragment (16 x 16, row-major bf16 at `base`, row stride ld elements) for this lane: matrices (rows 0-7, k 0-7),
// (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15) = a0..a3 of the mma.
__device__ __forceinline__ void tc_ldmatrix_a(uint32_t (&a)[4], const __nv_bfloat16* base, int ld, int lane) {
  const __nv_bfloat16* p = base + (lane % 8 + 8 * ((lane / 8) % 2)) * ld + 8 * (lane / 16);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
               : "r"(tc_smem_u32(p))
               : "memory");  // ordered after the shared stores it reads
}
// Four 8 x 8 bf16 matrices, row addresses from lanes 8q .. 8q + 7 for matrix q (16-byte aligned): r[q] holds this
// lane's pair (row lane / 4, columns 2 (lane % 4), + 1) of matrix q; `.trans`: (rows 2 (lane % 4), + 1, column lane / 4).
__device__ __forceinline__ void tc_ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(tc_smem_u32(p))
               : "memory");
}
__device__ __forceinline__ void tc_ldmatrix_x2(uint32_t (&r)[2], const void* p) {  // lanes 0 .. 15 give addresses
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(tc_smem_u32(p))
               : "memory");
}
__device__ __forceinline__ void tc_ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(tc_smem_u32(p))
               : "memory");
}
__device__ __forceinline__ void tc_cp_async16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(tc_smem_u32(dst)), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void tc_cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void tc_cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Rows [j0, j0 + kTcTJ) of the sequence (those >= row1 zero) into the stage buffer `dst` (columns [0, RP)).
template <class T>
__device__ __forceinline__ void tc_load_tile(const TcParams& p, const T* seq, int64_t j0, int64_t row1, T* dst,
                                             int ld) {
  if (p.vec) {
    constexpr int kEpc = 16 / sizeof(T);  // elements per 16-byte chunk
    const int cpr = p.RP / kEpc;
    for (int idx = threadIdx.x; idx < kTcTJ * cpr; idx += kTcThreads) {
      const int j = idx / cpr, ch = idx % cpr;
      const bool valid = j0 + j < row1;
      const T* src = seq + (valid ? (j0 + j) * p.c_s1 : 0) + ch * kEpc;
      tc_cp_async16(dst + j * ld + ch * kEpc, src, valid);
    }
  } else {
    for (int idx = threadIdx.x; idx < kTcTJ * p.RP; idx += kTcThreads) {
      const int j = idx / p.RP, k = idx % p.RP;
      if (j0 + j < row1)
        dst[j * ld + k] = seq[(j0 + j) * p.c_s1 + k];
      else
        tc_zero(dst[j * ld + k]);
    }
  }
}

// The latent n-block (8 columns) of a warp's i-th accumulator block: pairs of neighbouring blocks (2 warp + 16 (i / 2),
// + 1), so that one ldmatrix.x4.trans fetches the P x C operands of both.
__device__ __forceinline__ int tc_nblock(int warp, int i) { return (i / 2) * 16 + 2 * warp + (i % 2); }

// Sequence n's (length, slot): the host table, or the device form range-checked (0 rows where out of range).
__device__ __forceinline__ void tc_seq(const TcParams& p, int64_t n, int64_t& len, int64_t& slot) {
  if (p.lens) {
    len = p.lens[n], slot = p.slots[n];
    return;
  }
  len = p.dlens[n], slot = p.dslots[n];
  if (len < 1 || len > p.L || slot < 0 || slot >= p.Nc) len = 0, slot = 0;
}

template <class T, int MB, int RN>
__global__ void __launch_bounds__(kTcThreads, 1) mla_attend_tc_kernel(const TcParams p) {
  constexpr int kStages = kTcStages<T>, HP = 16 * MB, TPW = (MB + 1) / 2;  // TPW: score m-blocks per warp (at most)
  constexpr bool kBf16 = sizeof(T) == 2;
  // Score blocks per warp (pm / pn below): MB >= 3 shares a Q fragment over two n-blocks, else a C fragment
  // over the m-blocks; KC accumulator chains each, >= 4 mma chains in flight per warp.
  constexpr bool kShareA = MB >= 3;
  constexpr int NP = kShareA ? 2 : TPW, KC = NP == 1 ? 4 : 2;
  extern __shared__ __align__(16) unsigned char tc_sm[];
  const int kp = tc_kp(p.RP), ld = tc_ld(p.RP);
  const TcSmem lay(HP, p.RP, kStages, int(sizeof(T)));
  __nv_bfloat16* Qs = reinterpret_cast<__nv_bfloat16*>(tc_sm + lay.qs);
  T* Cs = reinterpret_cast<T*>(tc_sm + lay.cs);
  __nv_bfloat16* Ps = reinterpret_cast<__nv_bfloat16*>(tc_sm + lay.ps);
  float* red = reinterpret_cast<float*>(tc_sm + lay.red);  // [HP][4]
  float* sum = reinterpret_cast<float*>(tc_sm + lay.sum);  // [HP][4]
  float* ms = reinterpret_cast<float*>(tc_sm + lay.m);     // [2][HP]
  float* ls = reinterpret_cast<float*>(tc_sm + lay.l);     // [HP]

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, c = lane % 4;
  const int h0 = blockIdx.x * p.HG, hn = p.H - h0 < p.HG ? p.H - h0 : p.HG;  // the group's heads [h0, h0 + hn)
  const int s = blockIdx.y;
  const int64_t n = blockIdx.z;
  int64_t len = 0, slot = 0;
  tc_seq(p, n, len, slot);  // written before this call's absorb (host table, caller's index): read before pdl_wait
  const int64_t ntile_seq = (len + kTcTJ - 1) / kTcTJ;
  const int64_t tps = (ntile_seq + p.S - 1) / p.S;
  const int64_t row0 = int64_t(s) * tps * kTcTJ;
  const int64_t row1 = row0 + tps * kTcTJ < len ? row0 + tps * kTcTJ : len;  // may be <= row0: an empty split
  const int64_t nt = row1 > row0 ? (row1 - row0 + kTcTJ - 1) / kTcTJ : 0;
  const T* seq = static_cast<const T*>(p.cache) + slot * p.c_s0;

  // The first tiles' copies start before the wait for the absorb (the cache is written by earlier steps, complete
  // once the absorb's launch_dependents let this grid start: the absorb calls it after its own pdl_wait); then the
  // group's queries (bf16, padded by the absorb) join the first group; the padding columns and softmax state.
  if (kp > p.RP)  // before any copy into the stages: plain stores, published by the first tile's barrier
    for (int idx = tid; idx < kStages * kTcTJ * (kp - p.RP); idx += kTcThreads) {
      const int row = idx / (kp - p.RP), k = p.RP + idx % (kp - p.RP);
      tc_zero(Cs[row * ld + k]);
    }
#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < nt) tc_load_tile<T>(p, seq, row0 + int64_t(st) * kTcTJ, row1, Cs + st * kTcTJ * ld, ld);
    if (st == 0) {
      pdl_wait();  // QL (and Opart / ML, stream-ordered scratch) after the absorb
      const int cpr = kp / 8;  // 16-byte chunks per query row
      for (int idx = tid; idx < HP * cpr; idx += kTcThreads) {
        const int h = idx / cpr, ch = idx % cpr;
        const bool valid = h < hn;
        tc_cp_async16(Qs + h * ld + ch * 8, p.QL + ((n * p.H + h0 + (valid ? h : 0)) * int64_t(kp) + ch * 8), valid);
      }
    }
    tc_cp_commit();
  }
  pdl_launch_dependents();
  if (tid < HP) ms[tid] = -INFINITY, ls[tid] = 0.f;

  float acc[MB][RN][4];
#pragma unroll
  for (int mb = 0; mb < MB; ++mb)
#pragma unroll
    for (int i = 0; i < RN; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mb][i][e] = 0.f;

  // The warp's score blocks (m-block pm[i] of 16 heads, n-block pn[i] of 8 tile rows), i < NP; pm[i] >= MB: none.
  // kShareA (MB >= 3): one m-block warp % 4, n-blocks 2 (warp / 4) + {0, 1} (a Q fragment serves two n-blocks);
  // else m-blocks warp / 4 + 2 i, n-block warp % 4 (a C fragment serves the m-blocks).
  int pm[NP], pn[NP];
#pragma unroll
  for (int i = 0; i < NP; ++i) {
    pm[i] = kShareA ? warp % 4 : warp / 4 + 2 * i;
    pn[i] = kShareA ? 2 * (warp / 4) + i : warp % 4;
  }
  for (int64_t t = 0; t < nt; ++t) {
    const int par = int(t & 1);
    const int64_t j0 = row0 + t * kTcTJ;
    tc_cp_wait<kStages - 2>();  // this thread's copies of tile t (and of the queries) have landed
    __syncthreads();            // everyone's; the buffer of tile t - 1 and Ps are free
    {
      const int64_t tn = t + kStages - 1;
      if (tn < nt) tc_load_tile<T>(p, seq, row0 + tn * kTcTJ, row1, Cs + int(tn % kStages) * kTcTJ * ld, ld);
      tc_cp_commit();
    }
    const T* ct = Cs + int(t % kStages) * kTcTJ * ld;

    // Scores: the warp's NP (m-block, n-block) pairs (pm / pn), the k-steps of 16 spread over KC
    // accumulators (independent mma chains), added at the end.
    float scc[KC][NP][4];
#pragma unroll
    for (int q = 0; q < KC; ++q)
#pragma unroll
      for (int i = 0; i < NP; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) scc[q][i][e] = 0.f;
    // One k-step (16 columns from k) into chain q. bf16 with a shared B (kShareA false): b = that k-step's B pair of
    // the warp's n-block; otherwise B is fetched here per pair.
    const auto step = [&](float (&d)[NP][4], int k, const uint32_t* b) {
      if constexpr (kShareA) {
        uint32_t a[4];
        tc_ldmatrix_a(a, Qs + pm[0] * 16 * ld + k, ld, lane);
#pragma unroll
        for (int i = 0; i < NP; ++i) {
          const T* crow = ct + (pn[i] * 8 + g) * ld + 2 * c + k;
          uint32_t b0, b1;
          if constexpr (kBf16) {
            b0 = b[2 * i], b1 = b[2 * i + 1];
          } else {
            b0 = tc_pair(crow), b1 = tc_pair(crow + 8);
          }
          tc_mma(d[i], a, b0, b1);
        }
      } else {
        uint32_t b0, b1;
        if constexpr (kBf16) {
          b0 = b[0], b1 = b[1];
        } else {
          const T* crow = ct + (pn[0] * 8 + g) * ld + 2 * c + k;
          b0 = tc_pair(crow), b1 = tc_pair(crow + 8);
        }
#pragma unroll
        for (int i = 0; i < NP; ++i) {
          if (pm[i] >= MB) continue;
          uint32_t a[4];
          tc_ldmatrix_a(a, Qs + pm[i] * 16 * ld + k, ld, lane);
          tc_mma(d[i], a, b0, b1);
        }
      }
    };
    // The B pairs of k-steps k and k + 16 (two = true) or of k alone, for the warp's n-blocks (bf16: ldmatrix, matrix
    // q = rows nb*8 + lane % 8, columns k + 8 q; x2: lanes 16 .. 31 repeat lanes 0 .. 15's addresses). Layout
    // bk[k-step][2 * pair + half].
    constexpr int NB = kShareA ? NP : 1;  // n-blocks whose B a step needs
    const auto fetch_b = [&](uint32_t (&bk)[2][2 * NB], int k, bool two) {
      if constexpr (kBf16) {
#pragma unroll
        for (int i = 0; i < NB; ++i) {
          const T* rowp = ct + (pn[i] * 8 + lane % 8) * ld + k;
          if (two) {
            uint32_t r[4];
            tc_ldmatrix_x4(r, rowp + 8 * (lane / 8));
            bk[0][2 * i] = r[0], bk[0][2 * i + 1] = r[1], bk[1][2 * i] = r[2], bk[1][2 * i + 1] = r[3];
          } else {
            uint32_t r[2];
            tc_ldmatrix_x2(r, rowp + 8 * ((lane / 8) % 2));
            bk[0][2 * i] = r[0], bk[0][2 * i + 1] = r[1];
          }
        }
      }
    };
    // k-step k0 / 16 goes to chain (k0 / 16) % KC: the outer loop takes KC k-steps, its body is unrolled so that the
    // chain indices are constants.
    // pm[0] >= MB: the warp has no block (pm[0] is its only m-block, or both pairs share it).
#pragma unroll 2
    for (int k0 = 0; pm[0] < MB && k0 < kp; k0 += 16 * KC) {
#pragma unroll
      for (int u = 0; u < KC / 2; ++u) {
        const int k = k0 + 32 * u;
        if (k >= kp) break;
        const bool two = k + 32 <= kp;  // else kp % 32 == 16: k is the last k-step
        uint32_t bk[2][2 * NB] = {};
        fetch_b(bk, k, two);
        step(scc[2 * u], k, bk[0]);
        if (two) step(scc[2 * u + 1], k + 16, bk[1]);
      }
    }
    float sc[NP][4];
#pragma unroll
    for (int i = 0; i < NP; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if constexpr (KC == 4)
          sc[i][e] = (scc[0][i][e] + scc[1][i][e]) + (scc[2][i][e] + scc[KC - 1][i][e]);
        else
          sc[i][e] = scc[0][i][e] + scc[1][i][e];
      }
    // Lane holds (row g, cols 2c, 2c+1) in [0..1] and (row g + 8, same cols) in [2..3] of each block; pair i's
    // columns are cache rows pn[i]*8 + 2c, + 1 of the tile.
    bool v0[NP], v1[NP];
#pragma unroll
    for (int i = 0; i < NP; ++i) {
      v0[i] = j0 + pn[i] * 8 + 2 * c < row1, v1[i] = j0 + pn[i] * 8 + 2 * c + 1 < row1;
      if (pm[i] >= MB) continue;
#pragma unroll
      for (int e = 0; e < 4; ++e) sc[i][e] = (e % 2 ? v1[i] : v0[i]) ? sc[i][e] * p.scale : -INFINITY;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float mx = fmaxf(sc[i][2 * half], sc[i][2 * half + 1]);
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        if (c == 0) red[(pm[i] * 16 + g + 8 * half) * 4 + pn[i]] = mx;
      }
    }
    __syncthreads();
    // p = bf16(exp(score - m')) into Ps, row sums of the rounded p into sum.
#pragma unroll
    for (int i = 0; i < NP; ++i)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        if (pm[i] >= MB) continue;
        const int h = pm[i] * 16 + g + 8 * half;
        const float* r4 = red + h * 4;
        const float mn = fmaxf(fmaxf(ms[par * HP + h], fmaxf(r4[0], r4[1])), fmaxf(r4[2], r4[3]));
        const float e0 = v0[i] ? tc_bf16_round(__expf(sc[i][2 * half] - mn)) : 0.f;
        const float e1 = v1[i] ? tc_bf16_round(__expf(sc[i][2 * half + 1] - mn)) : 0.f;
        *reinterpret_cast<uint32_t*>(Ps + h * kTcLdp + pn[i] * 8 + 2 * c) = tc_pack(e0, e1);
        float sm = e0 + e1;
        sm += __shfl_xor_sync(0xffffffffu, sm, 1);
        sm += __shfl_xor_sync(0xffffffffu, sm, 2);
        if (c == 0) sum[h * 4 + pn[i]] = sm;
      }
    __syncthreads();
    // The running (m, l) of head tid; m' and alpha recomputed below from the same values (bit-identical).
    if (tid < HP) {
      const float* r4 = red + tid * 4;
      const float mo = ms[par * HP + tid];
      const float mn = fmaxf(fmaxf(mo, fmaxf(r4[0], r4[1])), fmaxf(r4[2], r4[3]));
      const float* s4 = sum + tid * 4;
      ls[tid] = ls[tid] * __expf(mo - mn) + ((s4[0] + s4[1]) + (s4[2] + s4[3]));
      ms[(par ^ 1) * HP + tid] = mn;
    }
    // O = O alpha + P C over the warp's latent n-blocks.
#pragma unroll
    for (int mb = 0; mb < MB; ++mb)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int h = mb * 16 + g + 8 * half;
        const float* r4 = red + h * 4;
        const float mo = ms[par * HP + h];
        const float mn = fmaxf(fmaxf(mo, fmaxf(r4[0], r4[1])), fmaxf(r4[2], r4[3]));
        const float alpha = __expf(mo - mn);
#pragma unroll
        for (int i = 0; i < RN; ++i) acc[mb][i][2 * half] *= alpha, acc[mb][i][2 * half + 1] *= alpha;
      }
#pragma unroll
    for (int ks = 0; ks < kTcTJ / 16; ++ks) {
      uint32_t b[RN][2];
      if constexpr (kBf16) {
        // Blocks (i, i + 1) = n-blocks (nb, nb + 1): matrices q = (rows ks*16 + 8 (q % 2) + lane % 8, columns
        // nb*8 + 8 (q / 2)), transposed: b[i] = (q 0, 1), b[i + 1] = (q 2, 3). Columns past R (the second block
        // only, never used) stay inside the row (ld >= 8 ceil(R / 8) + 8).
#pragma unroll
        for (int i = 0; i < RN; i += 2) {
          const int nb = tc_nblock(warp, i);
          if (nb * 8 < p.R) {
            const int q = lane / 8;
            uint32_t r[4];
            tc_ldmatrix_x4_trans(r, ct + (ks * 16 + 8 * (q % 2) + lane % 8) * ld + nb * 8 + 8 * (q / 2));
            b[i][0] = r[0], b[i][1] = r[1], b[i + 1][0] = r[2], b[i + 1][1] = r[3];
          } else {
            b[i][0] = b[i][1] = b[i + 1][0] = b[i + 1][1] = 0u;
          }
        }
      } else {
#pragma unroll
        for (int i = 0; i < RN; ++i) {
          const int r = tc_nblock(warp, i) * 8 + g;
          if (tc_nblock(warp, i) * 8 < p.R) {
            const T* cc = ct + (ks * 16 + 2 * c) * ld + r;
            b[i][0] = tc_pack(tc_f(cc[0]), tc_f(cc[ld]));
            b[i][1] = tc_pack(tc_f(cc[8 * ld]), tc_f(cc[9 * ld]));
          } else {
            b[i][0] = b[i][1] = 0u;
          }
        }
      }
#pragma unroll
      for (int mb = 0; mb < MB; ++mb) {
        uint32_t a[4];
        tc_ldmatrix_a(a, Ps + mb * 16 * kTcLdp + ks * 16, kTcLdp, lane);
#pragma unroll
        for (int i = 0; i < RN; ++i)
          if (tc_nblock(warp, i) * 8 < p.R) tc_mma(acc[mb][i], a, b[i][0], b[i][1]);
      }
    }
  }
  tc_cp_wait<0>();  // no copy outstanding at exit (the empty groups of the last tiles, the queries of an empty split)

  // Partials (an empty split: m = -inf, l = 0, O = 0). Thread tid < HP wrote (m, l) of head tid last.
  const int64_t base = (n * p.S + s) * int64_t(p.H);
  const bool pair_store = p.R % 2 == 0;  // (r, r + 1) 8-byte aligned: one float2 store
#pragma unroll
  for (int mb = 0; mb < MB; ++mb)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int h = mb * 16 + g + 8 * half;
      if (h >= hn) continue;
      float* out = p.Opart + (base + h0 + h) * p.R;
#pragma unroll
      for (int i = 0; i < RN; ++i) {
        const int r = tc_nblock(warp, i) * 8 + 2 * c;
        if (pair_store && r < p.R) {
          *reinterpret_cast<float2*>(out + r) = make_float2(acc[mb][i][2 * half], acc[mb][i][2 * half + 1]);
        } else {
          if (r < p.R) out[r] = acc[mb][i][2 * half];
          if (r + 1 < p.R) out[r + 1] = acc[mb][i][2 * half + 1];
        }
      }
    }
  if (tid < hn && tid < HP) {
    p.ML[(base + h0 + tid) * 2] = ms[int(nt & 1) * HP + tid];
    p.ML[(base + h0 + tid) * 2 + 1] = ls[tid];
  }
}

}  // namespace kimi::cuda::mla
