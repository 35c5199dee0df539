// src/cuda/kda/decode_stream.cuh: the streaming core of the one-token KDA kernels, shared by the fused decode step
// (decode_step.cuh, kimi/ops/kda_decode.h) and kda_recurrent_fwd's one-token path (recurrent_stream.cuh,
// kimi/ops/kda.h): one CTA of 512 threads per (sequence, head), the head's whole K x V fp32 state block copied into
// shared memory by the bulk copy engine while the CTA forms its token, updated there by one of the two state passes
// below, and copied back while the CTA writes its outputs.
// Math of a pass (the token in Token<KMAX>: q, k raw (rows >= K hold 0), a = exp(g) (1 beyond K), v; the token
// scalars rq, rk, qk, beta of kda_device.cuh token_factors), per state column j:
//   Sd = diag(a) S;  kS_j = rk k^T Sd_j;  e_j = v_j - kS_j;  o_j = rq q^T Sd_j + beta qk e_j  (-> Token::o[j])
//   S_j = Sd_j + (beta rk e_j) k
// (recurrent.cuh has the derivation of this one-pass form.)
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/bulk_copy.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/kda/kda_device.cuh"

namespace kimi::cuda::kda_decode_detail {

using namespace kda_detail;

inline constexpr int kThreads = 512;
inline constexpr int kWarps = kThreads / 32;
inline constexpr int kMaxV = 256;          // kKdaMaxHeadDim

// One element of type t (ElemType) at base + i, as raw bits (f32: 32 bits; bf16 / f16: 16 bits, zero-extended),
// 0 when !ok. Predicated loads, no branch and no conversion: nothing waits for the value until it is used, so a
// thread's loads are all in flight together (as load_f32, whose per-type branch converted right after each
// load, the conv taps were serialized: one memory round trip per tap).
__device__ __forceinline__ uint32_t ld_raw(const void* base, int64_t i, int t, bool ok) {
  const bool wide = t == el_f32;
  const char* a = static_cast<const char*>(base) + i * (wide ? 4 : 2);
  uint32_t r;
  asm volatile(
      "{\n\t.reg .pred pw, pn;\n\t"
      "setp.ne.b32 pw, %2, 0;\n\t"
      "setp.ne.b32 pn, %3, 0;\n\t"
      "mov.b32 %0, 0;\n\t"
      "@pw ld.global.b32 %0, [%1];\n\t"
      "@pn ld.global.u16 %0, [%1];\n\t}"
      : "=r"(r)
      : "l"(a), "r"(int(ok && wide)), "r"(int(ok && !wide)));
  return r;
}
// Raw bits of type t -> fp32 (selects, no branch).
__device__ __forceinline__ float raw_f32(uint32_t r, int t) {
  const float h = __half2float(__ushort_as_half(static_cast<unsigned short>(r)));
  return t == el_f32 ? __uint_as_float(r) : (t == el_bf16 ? __uint_as_float(r << 16) : h);
}

// The token of one (n, h) in shared memory, fp32.
template <int KMAX>
struct Token {
  static_assert(KMAX % 4 == 0, "rows of q, k, a are read as float4");
  alignas(16) float q[KMAX];
  alignas(16) float k[KMAX];
  alignas(16) float a[KMAX];
  float v[kMaxV];
  float o[kMaxV];
  float sums[kWarps][3];
};

// ---------------------------------------------------------------------------------------------
// The bulk path (the streaming kernels of decode_step.cuh and recurrent_stream.cuh): the head's K V fp32 state
// block (contiguous, 16-byte aligned, at most kBulkMaxBytes) moves through dynamic shared memory by the bulk copy
// engine. Thread 0 issues the global -> shared copies (chunks of kBulkChunk bytes, one mbarrier, parity 0) as soon
// as the slot is known, so HBM serves the state while the prologue runs; every thread waits on the mbarrier after
// the prologue, updates the state in the shared buffer, fences it for the
// async proxy (fence.proxy.async.shared::cta), and after the barrier before the epilogue thread 0 issues the
// shared -> global copies, which overlap the epilogue; it waits until they have read the shared source
// (cp.async.bulk.wait_group.read 0) before it exits, so the CTA's shared memory outlives their reads; their global
// writes complete with the grid, before any later kernel in the stream (the CUDA Programming Guide's TMA store
// example ends a kernel the same way, as CUTLASS's sm90 epilogues do; the H200 runs pass memcheck and racecheck).
inline constexpr int kBulkMaxBytes = 64 * 1024;  // 2 CTAs per SM with the static shared memory (registers allow 2)
inline constexpr int kBulkChunk = 16 * 1024;     // several copies in flight per CTA

// Thread 0: init the mbarrier (one arrival, the expect_tx below), then copy `bytes` (multiple of 16) from the
// global head block `src` (16-byte aligned) to `dst` (bulk_copy.cuh's protocol).
__device__ __forceinline__ void bulk_load(float* dst, const float* src, int bytes, uint64_t* bar) {
  mbar_init(bar, 1);
  mbar_init_fence();
  mbar_expect_tx(bar, uint32_t(bytes));
  for (int off = 0; off < bytes; off += kBulkChunk) {
    const int len = bytes - off < kBulkChunk ? bytes - off : kBulkChunk;
    bulk_g2s(reinterpret_cast<char*>(dst) + off, reinterpret_cast<const char*>(src) + off, uint32_t(len), bar);
  }
}
// Thread 0: copy the updated block back (bulk_load's chunks) and commit them as one group.
__device__ __forceinline__ void bulk_store(float* dst, const float* src, int bytes) {
  for (int off = 0; off < bytes; off += kBulkChunk) {
    const int len = bytes - off < kBulkChunk ? bytes - off : kBulkChunk;
    bulk_s2g(reinterpret_cast<char*>(dst) + off, reinterpret_cast<const char*>(src) + off, uint32_t(len));
  }
  bulk_commit();
}

// The state's shared copy (bulk path), 16-byte aligned.
extern __shared__ __align__(128) float4 kda_decode_state_smem[];

// Shared-memory counterparts of ld_state4 / st_state4 for the streaming vk kernel (the bulk path's block is only
// chosen when the row length is a multiple of 4, so the 16-byte accesses are aligned).
__device__ __forceinline__ float4 lds_state4(const float* p, int off, int valid) {
  if (valid == 4) return *reinterpret_cast<const float4*>(p + off);
  float4 r = make_float4(0.f, 0.f, 0.f, 0.f);
  if (valid > 0) r.x = p[off];
  if (valid > 1) r.y = p[off + 1];
  if (valid > 2) r.z = p[off + 2];
  if (valid > 3) r.w = p[off + 3];
  return r;
}
__device__ __forceinline__ void sts_state4(float* p, int off, int valid, float4 r) {
  if (valid == 4) {
    *reinterpret_cast<float4*>(p + off) = r;
    return;
  }
  if (valid > 0) p[off] = r.x;
  if (valid > 1) p[off + 1] = r.y;
  if (valid > 2) p[off + 2] = r.z;
  if (valid > 3) p[off + 3] = r.w;
}

// ---------------------------------------------------------------------------------------------
// The kv pass, kv_stream_update<CW>: state [K rows][V cols] at st (S[i][j] at i V + j, V a multiple of 4), after the
// block has landed and the token is in sm. CW = the power of 2 in [32, 256] covering V, NCT = CW / 32 column tiles of
// 32 columns, RGW = 16 / NCT row blocks of RB rows (K / RGW rounded up to 16). Warp w = (column tile ct = w % NCT, row
// block rb = w / NCT), lane = (row quarter rs = lane / 8, column group lane % 8): the thread's 4 columns c0 = 32 ct + 4
// (lane % 8) .. + 3 (float4: the 8 lanes of a row quarter read one 128-byte row segment, no bank conflict) and its RB /
// 4 consecutive rows from i0 = RB rb + (RB / 4) rs. Pass 1: decay (not stored) and the partial k^T Sd, q^T Sd of the
// 4 columns over the thread's rows, summed over the row quarters by shuffles (xor 8, then 16); lanes 0 .. 7 store the
// row block's sums in KvStreamScratch (4 KB in all); barrier; thread j < V sums them (row blocks in order),
// e_j, o_j, beta rk e_j; barrier; pass 2: each element again, x = S a_i (the same product as pass 1), S =
// fmaf(k_i, beta rk e_j, x), stored in place. The per-element operations are those of the register kernels; only the
// order of the sums over K differs.
// Why this mapping: one column and 32 rows per thread with scalar shared accesses took 27.1 K warp instructions per CTA
// (the vk kernel 20.8 K); with this one a step takes 320.9 us at 256 x 32 against 327.3, 126.5 at 32 x 96 against
// 130.6 (docs/gpu/2026-11-30-h200-run54.txt).
template <int CW>
struct KvStreamScratch {
  static constexpr int NCT = CW / 32, RGW = kWarps / NCT;
  static_assert(CW >= 32 && CW <= kMaxV && kWarps % NCT == 0, "whole column tiles per warp");
  alignas(16) float red_k[RGW][CW];  // the row blocks' partial k^T Sd
  alignas(16) float red_q[RGW][CW];  // and q^T Sd
  alignas(16) float be[CW];          // beta rk e_j
};
template <int CW, int KMAX>
__device__ __forceinline__ void kv_stream_update(float* st, Token<KMAX>& sm, KvStreamScratch<CW>& sc,
                                                 const TokenScalars& ts, int K, int V) {
  constexpr int NCT = KvStreamScratch<CW>::NCT, RGW = KvStreamScratch<CW>::RGW;
  auto& red_k = sc.red_k;
  auto& red_q = sc.red_q;
  auto& be = sc.be;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  // The thread's columns c0 .. c0 + 3 (V a multiple of 4: all or none of them exist) and rows i0 .. iend - 1.
  const int rb = warp / NCT, rs = lane / 8, c0 = 32 * (warp % NCT) + 4 * (lane % 8);
  const int RB = ((K + RGW - 1) / RGW + 15) & ~15;
  const int i0 = rb * RB + rs * (RB / 4);
  const int iend = i0 + RB / 4 < K ? i0 + RB / 4 : K;
  const bool live = c0 < V;
  float pk[4] = {0.f, 0.f, 0.f, 0.f}, pq[4] = {0.f, 0.f, 0.f, 0.f};
  if (live) {
#pragma unroll 2
    for (int i = i0; i < iend; ++i) {
      const float4 x = *reinterpret_cast<const float4*>(&st[i * V + c0]);
      const float ai = sm.a[i], ki = sm.k[i], qi = sm.q[i];
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const float xd = comp(x, c) * ai;
        pk[c] = fmaf(ki, xd, pk[c]);
        pq[c] = fmaf(qi, xd, pq[c]);
      }
    }
  }
#pragma unroll
  for (int c = 0; c < 4; ++c)
#pragma unroll
    for (int m = 8; m <= 16; m *= 2) {
      pk[c] += __shfl_xor_sync(0xffffffffu, pk[c], m);
      pq[c] += __shfl_xor_sync(0xffffffffu, pq[c], m);
    }
  if (rs == 0 && live) {
    *reinterpret_cast<float4*>(&red_k[rb][c0]) = make_float4(pk[0], pk[1], pk[2], pk[3]);
    *reinterpret_cast<float4*>(&red_q[rb][c0]) = make_float4(pq[0], pq[1], pq[2], pq[3]);
  }
  __syncthreads();
  if (tid < V) {  // column tid: the sums over K, e, o
    float ks = 0.f, qs = 0.f;
#pragma unroll
    for (int g = 0; g < RGW; ++g) {
      ks += red_k[g][tid];
      qs += red_q[g][tid];
    }
    const float ev = sm.v[tid] - ts.rk * ks;
    sm.o[tid] = ts.rq * qs + ts.beta * ts.qk * ev;
    be[tid] = ts.beta * ts.rk * ev;
  }
  __syncthreads();
  if (live) {
    const float4 b4 = *reinterpret_cast<const float4*>(&be[c0]);
#pragma unroll 2
    for (int i = i0; i < iend; ++i) {
      float4& x = *reinterpret_cast<float4*>(&st[i * V + c0]);
      const float ai = sm.a[i], ki = sm.k[i];
      float4 y = x;
      y.x = fmaf(ki, b4.x, y.x * ai), y.y = fmaf(ki, b4.y, y.y * ai);
      y.z = fmaf(ki, b4.z, y.z * ai), y.w = fmaf(ki, b4.w, y.w * ai);
      x = y;
    }
  }
}
// ---------------------------------------------------------------------------------------------
// The vk pass: state [V rows][K cols] at sblock (S[i][j] at j K + i, K a multiple of 4), the register kernels'
// mapping (decode_step.cuh header: thread = (K group kg of 4 consecutive K, column group vg), KG lanes per column
// in one warp, K slots 4 kg + 4 KG c (c < KC), VG = 512 / KG column groups, columns j0 + vg + VG m (m < NV)) and
// math, each column m loaded from shared memory, reduced, updated and stored before the next (4 KC state floats live
// per thread). vk_stream_slots takes the thread's K slots of a, k, q from the token (before the block has landed),
// vk_stream_update runs the pass (after); o_j is written by lane kg = 0 of column j, without a barrier after it.
template <int KC>
struct VkSlots {
  float a[KC][4], kk[KC][4], qq[KC][4];
  int kvalid[KC];  // the thread's valid K of slot c (0 .. 4)
};
// The slots as vk_token_slots loads them, with the valid counts in the same loop: vk_token_slots followed by a
// separate loop compiles differently at K > 128, and this is the code the H200 runs verified.
template <int KG, int KC, int KMAX>
__device__ __forceinline__ VkSlots<KC> vk_stream_slots(const Token<KMAX>& sm, int K) {
  const int kg = int(threadIdx.x) % KG;
  VkSlots<KC> sl;
#pragma unroll
  for (int c = 0; c < KC; ++c) {
    const int i0 = 4 * kg + 4 * KG * c;
    const float4 a4 = *reinterpret_cast<const float4*>(&sm.a[i0]);
    const float4 k4 = *reinterpret_cast<const float4*>(&sm.k[i0]);
    const float4 q4 = *reinterpret_cast<const float4*>(&sm.q[i0]);
    sl.a[c][0] = a4.x, sl.a[c][1] = a4.y, sl.a[c][2] = a4.z, sl.a[c][3] = a4.w;
    sl.kk[c][0] = k4.x, sl.kk[c][1] = k4.y, sl.kk[c][2] = k4.z, sl.kk[c][3] = k4.w;
    sl.qq[c][0] = q4.x, sl.qq[c][1] = q4.y, sl.qq[c][2] = q4.z, sl.qq[c][3] = q4.w;
    sl.kvalid[c] = clamp4(K - i0);
  }
  return sl;
}
template <int KG, int KC, int NV, int KMAX>
__device__ __forceinline__ void vk_stream_update(float* sblock, Token<KMAX>& sm, const VkSlots<KC>& sl,
                                                 const TokenScalars& ts, int K, int V) {
  constexpr int VG = kThreads / KG;  // column groups
  constexpr int BV = VG * NV;        // columns per tile
  static_assert(KG <= 32 && 32 % KG == 0 && KMAX == 4 * KG * KC, "a column's K groups lie in one warp");
  const int kg = int(threadIdx.x) % KG, vg = int(threadIdx.x) / KG;
  float* const shead = sblock + 4 * kg;  // + column j * K: the thread's K slot 0
  for (int j0 = 0; j0 < V; j0 += BV) {
#pragma unroll
    for (int m = 0; m < NV; ++m) {
      const int j = j0 + vg + VG * m;
      const bool live = j < V;  // uniform over the column's KG lanes (one warp)
      float* const col = shead + j * K;
      float4 S[KC];
#pragma unroll
      for (int c = 0; c < KC; ++c) S[c] = lds_state4(col, 4 * KG * c, live ? sl.kvalid[c] : 0);
      float pk, pq;
      vk_decay_dots<KC, KG>(S, sl.a, sl.kk, sl.qq, pk, pq);
      const float ev = (live ? sm.v[j] : 0.f) - ts.rk * pk;
      if (kg == 0 && live) sm.o[j] = ts.rq * pq + ts.beta * ts.qk * ev;
      const float bej = ts.beta * ts.rk * ev;
      vk_add_k<KC>(S, sl.kk, bej);
#pragma unroll
      for (int c = 0; c < KC; ++c) sts_state4(col, 4 * KG * c, live ? sl.kvalid[c] : 0, S[c]);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The streaming kernels' tilings by head dims (host side; the block fits kBulkMaxBytes, so K V <= 16384), for the
// decode step's and kda_recurrent_fwd's launchers: f.template operator()<...>() with
//   kv: <CW, KMAX>, CW the power of 2 in [32, 256] covering V, KMAX 128 or 256 >= K (K > 128 leaves V <= 128);
//   vk: <KG, KC, NV, MIN_CTAS>, KMAX = 4 KG KC >= K, 3 CTAs per SM up to K = 128.
template <class F>
void kv_stream_tiling(int K, int V, F&& f) {
  if (K <= 128) {
    if (V <= 32) f.template operator()<32, 128>();
    else if (V <= 64) f.template operator()<64, 128>();
    else if (V <= 128) f.template operator()<128, 128>();
    else f.template operator()<256, 128>();
  } else {
    if (V <= 32) f.template operator()<32, 256>();
    else if (V <= 64) f.template operator()<64, 256>();
    else f.template operator()<128, 256>();
  }
}
template <class F>
void vk_stream_tiling(int K, F&& f) {
  if (K <= 32) f.template operator()<8, 1, 4, 3>();
  else if (K <= 64) f.template operator()<16, 1, 8, 3>();
  else if (K <= 128) f.template operator()<32, 1, 8, 3>();
  else f.template operator()<32, 2, 8, 2>();
}

}  // namespace kimi::cuda::kda_decode_detail
