// src/cuda/mla/decode_proj.cuh: the weight GEMVs around mla_decode's attend (absorbed form, SPEC 6,
// kimi/ops/mla.h), written to stream W_kvb at memory speed:
//
//  absorb:  QL[n, h] = [W_kvb_k[h]^T q_nope[n, h] | q_pe[n, h]]                f32 [N, H, R+P] (FFMA attend)
//           or bf16(QL) [N, H, KP], KP = R+P rounded up to 16, zero padded      (tensor-core attend, decode_tc.cuh)
//           (also, for the FFMA attend, its lens / slots table from device index tensors: one launch instead of two)
//  merge:   per (n, h): m = max_s m_s;  w_s = exp(m_s - m) (0 for an empty split, m_s = -inf);  l = sum_s w_s l_s
//           ol[n, h] = (sum_s w_s Opart[n, s, h]) * (1 / l)                     f32 [N, H, R]   (only for S > 1)
//  project: o[n, h, e] = (W_kvb_v[h] ol[n, h])_e * sigmoid(gate[n, h, e])       (gate optional)
//           S = 1: ol[n, h] = Opart[n, 0, h] * (1 / l), read in place (no merge launch, the same values)
//
// Work split. Every CTA streams a slice of W_kvb once for a block of up to kProjNT tokens, with 16-byte weight loads
// (8 elements, any float dtype) issued before their FMAs, so the weight leaves HBM once per call at N <= kProjNT and
// once per token block (from L2 after the first) beyond; many CTAs per head fill the SMs at N = 1:
//   absorb:  CTA = (head h, kAbCols latent columns, token block). Thread t = (column group t % 8 of 8 columns, row
//            lane t / 8 of 32): rows d = t / 8 + 32 i of W_kvb_k[h]; sums over the 4 row lanes of a warp by shuffles,
//            then over the 8 warps in shared memory, in a fixed order.
//   merge:   CTA = (head h, 256 / SG units of 4 columns (float4; 1 column where R % 4 != 0), token n), SG split
//            groups (decode_plan.h): thread (unit, group g) sums the splits s = g, g + SG, ... in order; the SG
//            partial sums add in group order. m and l by block reductions (shuffle tree, then the 8 warps in order).
//   project: CTA = (head h, `rows` output rows of W_kvb_v[h], token block). Warp = 2 rows at a time; lane = 8
//            columns of each 256-column block (R <= 512: 2 blocks); a warp shuffle tree sums the lanes; lane
//            j * kProjNT + i gates and stores output (row j, token i) of the step (its gate loaded at the step's start).
// Launch: all three by programmatic_launch (pdl.cuh): each waits (pdl_wait) before touching q, scratch or o, then
// lets its dependents start; the absorb and the project first prefetch their weight rows into L2.
// Fixed reduction orders everywhere and no atomics: replays are bit-identical. All in fp32 FFMA: with bf16 (or f16)
// q and weights every product is exact in f32, so only the f32 summation order differs from the CPU backend
// (~1e-7 relative: the f32 bar of 1e-5 holds; docs/ops/mla.md "CUDA decode").
// Empty splits (m = -inf, l = 0, O = 0) add exact zeros, so a sequence's result does not depend on how many empty
// splits trail it (device lens plan S for the cache length); a sequence with no rows (length 0) gets 0 / 0 = NaN.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/elementwise.cuh"
#include "cuda/index.cuh"
#include "cuda/pdl.cuh"

namespace kimi::cuda::mla {

inline constexpr int kProjThreads = 256, kProjNT = 8, kAbCols = 64, kProjMaxR = 512;

// ---- 8 consecutive weight elements as f32: one or two 16-byte loads where `vec` (the row chunk is 16-byte aligned
// and all 8 columns exist), else element loads with the columns >= `left` zero.
__device__ __forceinline__ void proj_load8(const float* p, bool vec, int left, float (&v)[8]) {
  if (vec) {
    const float4 a = __ldg(reinterpret_cast<const float4*>(p)), b = __ldg(reinterpret_cast<const float4*>(p) + 1);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  } else {
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = k < left ? p[k] : 0.f;
  }
}
__device__ __forceinline__ void proj_load8(const __nv_bfloat16* p, bool vec, int left, float (&v)[8]) {
  if (vec) {
    const uint4 u = __ldg(reinterpret_cast<const uint4*>(p));
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 f = __bfloat1622float2(h[k]);
      v[2 * k] = f.x, v[2 * k + 1] = f.y;
    }
  } else {
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = k < left ? __bfloat162float(p[k]) : 0.f;
  }
}
__device__ __forceinline__ void proj_load8(const __half* p, bool vec, int left, float (&v)[8]) {
  if (vec) {
    const uint4 u = __ldg(reinterpret_cast<const uint4*>(p));
    const __half2* h = reinterpret_cast<const __half2*>(&u);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 f = __half22float2(h[k]);
      v[2 * k] = f.x, v[2 * k + 1] = f.y;
    }
  } else {
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = k < left ? __half2float(p[k]) : 0.f;
  }
}

// A weight chunk into L2 (a hint; weights are never written, so pdl.cuh allows it before pdl_wait).
__device__ __forceinline__ void proj_prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// ---- 1. absorb: grid (H * ceil(R / kAbCols), ceil(N / nt)), kProjThreads threads, dynamic shared memory
// absorb_smem_bytes(nt, Dn). blockIdx.x = h * column blocks + column block (a head's CTAs are neighbours).
struct AbsorbParams {
  const void* q;  // [N, H, Dn + P], element type tq
  int tq;
  int64_t q_s0, q_s1;
  const void* w;  // W_kvb [H (Dn + Dv), R] (element type: the kernel's TW), row stride ldw
  int64_t ldw;
  int wvec;   // 1: the weight's data and row stride are 16-byte aligned
  float* QL;            // [N, H, R + P] f32 (the FFMA attend), or null: QLb
  __nv_bfloat16* QLb;   // [N, H, kp] bf16, columns [R + P, kp) zero (the tensor-core attend, decode_tc.cuh)
  int kp;
  int H, R, P, Dn, Dv, ncb;  // ncb: column blocks per head
  int64_t N;
  int nt;  // tokens per CTA (<= kProjNT)
  // The device form of lens / slots (src/core/index.h) into the attend's table: lens [N] then slots [N]; a length
  // outside [1, L] or a slot outside [0, Nc) becomes length 0 (no rows: the sequence's o is NaN). tab null: none.
  DevIndex lens, slots;
  int64_t Nc, L;
  int64_t* tab;
};

inline size_t absorb_smem_bytes(int nt, int Dn) {
  const size_t qs = size_t(nt) * Dn, red = size_t(kProjThreads / 32) * nt * kAbCols;
  return sizeof(float) * (qs > red ? qs : red);
}

template <class TW>
__global__ void __launch_bounds__(kProjThreads) mla_absorb_kernel(const AbsorbParams p) {
  extern __shared__ __align__(16) float ab_sm[];  // qs [nt][Dn]; after the sums, red [8 warps][nt][kAbCols]
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int h = int(blockIdx.x) / p.ncb, cb = int(blockIdx.x) % p.ncb;
  const int64_t n0 = int64_t(blockIdx.y) * p.nt;
  const int cnt = p.N - n0 < p.nt ? int(p.N - n0) : p.nt;
  const int RP = p.R + p.P;
  const int cg = tid % 8, dr = tid / 8;  // columns c0 .. c0 + 7; rows d = dr + 32 i
  const int c0 = cb * kAbCols + 8 * cg;
  const TW* wc = static_cast<const TW*>(p.w) + int64_t(h) * (p.Dn + p.Dv) * p.ldw + c0;
  if (c0 < p.R)
    for (int d = dr; d < p.Dn; d += 32) proj_prefetch_l2(wc + int64_t(d) * p.ldw);
  // Launched with programmatic_launch (pdl.cuh): q, the scratch and the table after the previous kernel; the attend
  // may start once every CTA is past this wait (it reads the cache and the index before its own wait).
  pdl_wait();
  pdl_launch_dependents();

  if (p.tab && blockIdx.x == 0 && tid < cnt) {
    const int64_t n = n0 + tid, len = p.lens[n], sl = p.slots[n];
    const bool ok = len >= 1 && len <= p.L && sl >= 0 && sl < p.Nc;
    p.tab[n] = ok ? len : 0;
    p.tab[p.N + n] = ok ? sl : 0;
  }
  // q's loads are issued kLd at a time before their stores (a store to global memory may alias the next load).
  constexpr int kLd = 4;
  if (cb == 0) {  // q_pe (f32), or q_pe and the zero padding rounded to bf16 as the attend reads them
    const int np = p.QL ? p.P : p.kp - p.R;
    for (int base = tid; base < cnt * np; base += kLd * kProjThreads) {
      float v[kLd];
#pragma unroll
      for (int u = 0; u < kLd; ++u) {
        const int idx = base + u * kProjThreads, i = idx / np, e = idx % np;
        v[u] = idx < cnt * np && e < p.P ? load_f32(p.q, (n0 + i) * p.q_s0 + h * p.q_s1 + p.Dn + e, p.tq) : 0.f;
      }
#pragma unroll
      for (int u = 0; u < kLd; ++u) {
        const int idx = base + u * kProjThreads, i = idx / np, e = idx % np;
        if (idx >= cnt * np) break;
        if (p.QL)
          p.QL[((n0 + i) * p.H + h) * int64_t(RP) + p.R + e] = v[u];
        else
          p.QLb[((n0 + i) * p.H + h) * int64_t(p.kp) + p.R + e] = __float2bfloat16_rn(v[u]);
      }
    }
  }
  float* qs = ab_sm;
  for (int base = tid; base < cnt * p.Dn; base += kLd * kProjThreads) {
    float v[kLd];
#pragma unroll
    for (int u = 0; u < kLd; ++u) {
      const int idx = base + u * kProjThreads, i = idx / p.Dn, d = idx % p.Dn;
      v[u] = idx < cnt * p.Dn ? load_f32(p.q, (n0 + i) * p.q_s0 + h * p.q_s1 + d, p.tq) : 0.f;
    }
#pragma unroll
    for (int u = 0; u < kLd; ++u)
      if (base + u * kProjThreads < cnt * p.Dn) qs[base + u * kProjThreads] = v[u];
  }
  __syncthreads();

  float acc[kProjNT][8];
#pragma unroll
  for (int i = 0; i < kProjNT; ++i)
#pragma unroll
    for (int k = 0; k < 8; ++k) acc[i][k] = 0.f;
  if (c0 < p.R) {
    const bool vec = p.wvec && c0 + 8 <= p.R;
    const int left = p.R - c0;
#pragma unroll 4
    for (int d = dr; d < p.Dn; d += 32) {
      float wv[8];
      proj_load8(wc + int64_t(d) * p.ldw, vec, left, wv);
#pragma unroll
      for (int i = 0; i < kProjNT; ++i) {
        if (i >= cnt) break;
        const float qv = qs[i * p.Dn + d];
#pragma unroll
        for (int k = 0; k < 8; ++k) acc[i][k] = fmaf(wv[k], qv, acc[i][k]);
      }
    }
  }
  // The warp's 4 row lanes of a column group (lanes cg, cg + 8, cg + 16, cg + 24), then the 8 warps in order.
#pragma unroll
  for (int i = 0; i < kProjNT; ++i) {
    if (i >= cnt) break;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      float v = acc[i][k];
      v += __shfl_xor_sync(0xffffffffu, v, 8);
      v += __shfl_xor_sync(0xffffffffu, v, 16);
      acc[i][k] = v;
    }
  }
  __syncthreads();  // qs is no longer read: its space becomes red
  float* red = ab_sm;
  if (lane < 8) {
#pragma unroll
    for (int i = 0; i < kProjNT; ++i) {
      if (i >= cnt) break;
#pragma unroll
      for (int k = 0; k < 8; ++k) red[(warp * p.nt + i) * kAbCols + 8 * lane + k] = acc[i][k];
    }
  }
  __syncthreads();
  for (int idx = tid; idx < cnt * kAbCols; idx += kProjThreads) {
    const int i = idx / kAbCols, c = idx % kAbCols, r = cb * kAbCols + c;
    if (r >= p.R) continue;
    float v = red[i * kAbCols + c];
#pragma unroll
    for (int w = 1; w < kProjThreads / 32; ++w) v += red[(w * p.nt + i) * kAbCols + c];
    if (p.QL)
      p.QL[((n0 + i) * p.H + h) * int64_t(RP) + r] = v;
    else
      p.QLb[((n0 + i) * p.H + h) * int64_t(p.kp) + r] = __float2bfloat16_rn(v);
  }
}

// ---- block reductions of 256 threads (shuffle tree, then the 8 warps' values in order): every thread returns the
// same value; `red8` is 8 floats of shared memory, free again on return.
__device__ __forceinline__ float proj_block_max(float v, float* red8) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (threadIdx.x % 32 == 0) red8[threadIdx.x / 32] = v;
  __syncthreads();
  float r = red8[0];
#pragma unroll
  for (int w = 1; w < kProjThreads / 32; ++w) r = fmaxf(r, red8[w]);
  __syncthreads();
  return r;
}
__device__ __forceinline__ float proj_block_sum(float v, float* red8) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) red8[threadIdx.x / 32] = v;
  __syncthreads();
  float r = red8[0];
#pragma unroll
  for (int w = 1; w < kProjThreads / 32; ++w) r += red8[w];
  __syncthreads();
  return r;
}

// ---- 2. merge (S > 1): grid (H * ncb, N), kProjThreads threads, dynamic shared memory merge_smem_bytes(S).
// blockIdx.x = h * ncb + column block. Units of `vec` columns (4: float4 loads, R % 4 == 0; else 1); a CTA covers
// kProjThreads / sg units of one (n, h), ncb = ceil(R / vec / (kProjThreads / sg)).
struct MergeParams {
  const float* Opart;  // [N, S, H, R] (16-byte aligned)
  const float* ML;     // [N, S, H, 2]
  float* ol;           // [N, H, R]
  int S, H, R, sg, ncb, vec;  // sg: split groups (1, 2, 4 or 8)
};

inline size_t merge_smem_bytes(int S) { return sizeof(float) * (size_t(S) + 4 * kProjThreads); }

__global__ void __launch_bounds__(kProjThreads) mla_merge_kernel(const MergeParams p) {
  extern __shared__ __align__(16) float mg_sm[];
  float* ws = mg_sm;          // [S]: w_s
  float* part = mg_sm + p.S;  // [vec][256]: the groups' sums
  __shared__ float red8[kProjThreads / 32];
  const int tid = threadIdx.x;
  const int h = int(blockIdx.x) / p.ncb, cb = int(blockIdx.x) % p.ncb;
  const int64_t n = blockIdx.y;
  const int64_t base = n * p.S * int64_t(p.H) + h;  // split s of (n, h): row base + s H
  pdl_wait();  // programmatic_launch (pdl.cuh): the attend's partials
  pdl_launch_dependents();

  float m = -INFINITY;
  for (int s = tid; s < p.S; s += kProjThreads) m = fmaxf(m, p.ML[(base + int64_t(s) * p.H) * 2]);
  m = proj_block_max(m, red8);
  float l = 0.f;
  for (int s = tid; s < p.S; s += kProjThreads) {
    const float ms = p.ML[(base + int64_t(s) * p.H) * 2];
    const float w = ms == -INFINITY ? 0.f : expf(ms - m);
    ws[s] = w;
    l = fmaf(w, p.ML[(base + int64_t(s) * p.H) * 2 + 1], l);
  }
  l = proj_block_sum(l, red8);  // its barriers also publish ws

  const int lanes = kProjThreads / p.sg, g = tid / lanes, ul = tid % lanes, u = cb * lanes + ul;
  const int units = p.R / p.vec;
  float a[4] = {0.f, 0.f, 0.f, 0.f};
  if (u < units) {
    if (p.vec == 4) {
      const float4* src = reinterpret_cast<const float4*>(p.Opart + base * p.R) + u;
      const int64_t step = int64_t(p.H) * (p.R / 4);  // one split, in float4
#pragma unroll 4
      for (int s = g; s < p.S; s += p.sg) {
        const float w = ws[s];
        const float4 x = src[int64_t(s) * step];
        a[0] = fmaf(w, x.x, a[0]);
        a[1] = fmaf(w, x.y, a[1]);
        a[2] = fmaf(w, x.z, a[2]);
        a[3] = fmaf(w, x.w, a[3]);
      }
    } else {
      const float* src = p.Opart + base * p.R + u;
#pragma unroll 4
      for (int s = g; s < p.S; s += p.sg) a[0] = fmaf(ws[s], src[int64_t(s) * p.H * p.R], a[0]);
    }
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) part[k * kProjThreads + tid] = a[k];
  __syncthreads();
  if (g == 0 && u < units) {
    const float inv = 1.f / l;
    for (int k = 0; k < p.vec; ++k) {
      float v = part[k * kProjThreads + ul];
      for (int j = 1; j < p.sg; ++j) v += part[k * kProjThreads + j * lanes + ul];
      p.ol[(n * p.H + h) * p.R + int64_t(u) * p.vec + k] = v * inv;
    }
  }
}

// ---- 3. project: grid (H * ceil(Dv / rows), ceil(N / nt)), kProjThreads threads, dynamic shared memory
// project_smem_bytes(nt, R). blockIdx.x = h * row blocks + row block.
struct ProjParams {
  const float* ol;  // [N, H, R]: merged, or (ML set) the single split's unnormalised Opart
  const float* ML;  // null, or [N, 1, H, 2] (S = 1): row (n, h) of ol is scaled by 1 / l = 1 / ML[(n H + h) 2 + 1]
  const void* w;    // W_kvb [H (Dn + Dv), R] (element type: the kernel's TW), row stride ldw
  int64_t ldw;
  int wvec;
  const void* gate;  // null or [N, H Dv], element type tg, row stride g_s0
  int tg;
  int64_t g_s0;
  void* o;  // [N, H, Dv], element type to
  int to;
  int64_t o_s0, o_s1;
  int H, R, Dn, Dv, rows, nrb;  // rows: output rows per CTA (a multiple of 16); nrb: row blocks per head
  int64_t N;
  int nt;  // tokens per CTA (<= kProjNT)
};

__host__ __device__ inline int proj_ldo(int R) { return (R + 7) / 8 * 8; }
inline size_t project_smem_bytes(int nt, int R) { return sizeof(float) * size_t(nt) * proj_ldo(R); }

template <class TW>
__global__ void __launch_bounds__(kProjThreads) mla_project_kernel(const ProjParams p) {
  extern __shared__ __align__(16) float os[];  // [nt][ldo]: ol of the CTA's tokens, zero past R
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int h = int(blockIdx.x) / p.nrb, rb = int(blockIdx.x) % p.nrb;
  const int64_t n0 = int64_t(blockIdx.y) * p.nt;
  const int cnt = p.N - n0 < p.nt ? int(p.N - n0) : p.nt;
  const int ldo = proj_ldo(p.R);
  const int e1 = (rb + 1) * p.rows < p.Dv ? (rb + 1) * p.rows : p.Dv;
  const TW* wv_h = static_cast<const TW*>(p.w) + (int64_t(h) * (p.Dn + p.Dv) + p.Dn) * p.ldw;
  for (int e = rb * p.rows + 2 * warp; e < e1; e += 16)  // the warp's weight rows into L2 (see proj_prefetch_l2)
    for (int j = 0; j < 2 && e + j < e1; ++j)
      for (int c = 8 * lane; c < p.R; c += 256) proj_prefetch_l2(wv_h + int64_t(e + j) * p.ldw + c);
  pdl_wait();  // programmatic_launch (pdl.cuh): ol / the partials, o
  pdl_launch_dependents();
  for (int idx = tid; idx < cnt * ldo; idx += kProjThreads) {
    const int i = idx / ldo, r = idx % ldo;
    const int64_t row = (n0 + i) * p.H + h;
    float v = 0.f;
    if (r < p.R) {
      v = p.ol[row * p.R + r];
      if (p.ML) v *= 1.f / p.ML[row * 2 + 1];
    }
    os[idx] = v;
  }
  __syncthreads();

  constexpr int kKB = kProjMaxR / 256;  // 256-column blocks
  static_assert(2 * kProjNT <= 32, "a lane per (row, token) output of a warp's step");
  const int oj = lane / kProjNT, oi = lane % kProjNT;  // this lane's output of each step: row e + oj, token n0 + oi
  for (int e = rb * p.rows + 2 * warp; e < e1; e += 16) {
    // Lane oj kProjNT + oi stores output (e + oj, n0 + oi); its gate is loaded here and used at the end, so the
    // warp's gate loads and stores run in parallel rather than one dependent round trip per output.
    const bool mine = lane < 2 * kProjNT && oi < cnt && e + oj < e1;
    const int64_t g_at = (n0 + oi) * p.g_s0 + int64_t(h) * p.Dv + e + oj;
    const float graw = mine && p.gate ? load_f32(p.gate, g_at, p.tg) : 0.f;
    float wv[2][kKB][8];
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int kb = 0; kb < kKB; ++kb) {
        const int c = kb * 256 + 8 * lane;
        if (e + j < e1 && c < p.R)
          proj_load8(wv_h + int64_t(e + j) * p.ldw + c, p.wvec && c + 8 <= p.R, p.R - c, wv[j][kb]);
        else
#pragma unroll
          for (int k = 0; k < 8; ++k) wv[j][kb][k] = 0.f;
      }
    float d[2][kProjNT];
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int i = 0; i < kProjNT; ++i) d[j][i] = 0.f;
#pragma unroll
    for (int i = 0; i < kProjNT; ++i) {
      if (i >= cnt) break;
#pragma unroll
      for (int kb = 0; kb < kKB; ++kb) {
        const int c = kb * 256 + 8 * lane;
        if (c >= ldo) break;
        const float4 a = *reinterpret_cast<const float4*>(os + i * ldo + c);
        const float4 b = *reinterpret_cast<const float4*>(os + i * ldo + c + 4);
        const float x[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
          for (int k = 0; k < 8; ++k) d[j][i] = fmaf(wv[j][kb][k], x[k], d[j][i]);
      }
    }
    float out = 0.f;  // the butterfly leaves every sum in every lane; lane j kProjNT + i keeps (j, i)
#pragma unroll
    for (int i = 0; i < kProjNT; ++i) {
      if (i >= cnt) break;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        float v = d[j][i];
#pragma unroll
        for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == j * kProjNT + i) out = v;
      }
    }
    if (mine) {
      if (p.gate) out *= 1.f / (1.f + expf(-graw));
      store_f32(p.o, (n0 + oi) * p.o_s0 + int64_t(h) * p.o_s1 + e + oj, p.to, out);
    }
  }
}

}  // namespace kimi::cuda::mla
