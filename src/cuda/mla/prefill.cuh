// src/cuda/mla/prefill.cuh: causal attention of mla_prefill (explicit form, SPEC 6) on FFMA, one CTA per
// (tile of up to kPfBQ queries of one sequence, head h):
//   k_j = [k_nope_h,j | k_pe_j]  (k_nope from kv, k_pe from the input)    v_j = v_h,j (from kv)
//   s_ij = (q_i . k_j) * scale   for keys j <= i of the same sequence      fp32, online (max-subtracted) softmax
//   o_i = (sum_j p_ij v_j / sum_j p_ij) * sigmoid(gate_i)   (gate optional)
// kv: fp32 [M, H*(Dn+Dv)] (token m, head h at m * ldkv + h*(Dn+Dv): Dn key values, then Dv values), M = B*T.
// Tokens are flattened m = b*T + t; a view's token m is at (m / T) * s0 + (m % T) * s1.
// Tile table: per CTA (m0 = first token of its sequence, i0 = first query within it, nq queries).
// Thread layout (256 threads): ty = tid / 16 owns rows 4ty..4ty+3, tx = tid % 16 owns key columns tx + 16c
// (c < 4) of S and value columns tx + 16c (c < 8) of O: Dv <= 128, Dk = Dn + P <= 256 (checked by the launcher).
// NOTE: correctness first: fp32 FFMA (the f32 bar is 1e-5), no tensor cores, one buffer; see docs/ops/mla.md.
#pragma once

#include <cstdint>

#include "cuda/elementwise.cuh"

namespace kimi::cuda::mla {

inline constexpr int kPfBQ = 64, kPfBK = 64, kPfThreads = 256, kPfMaxDv = 128, kPfMaxDk = 256;

struct PrefillParams {
  const void* q;  // [B, T, H, Dq]
  int tq;
  int64_t q_s0, q_s1, q_s2;
  const float* kv;  // [M, H*(Dn+Dv)]
  int64_t ldkv;
  const void* pe;  // [B, T, P]
  int tp;
  int64_t p_s0, p_s1;
  const void* gate;  // [B, T, H*Dv] or null
  int tg;
  int64_t g_s0, g_s1;
  void* o;  // [B, T, H, Dv]
  int to;
  int64_t o_s0, o_s1, o_s2;
  const int64_t* tiles;  // [ntiles][3]: m0, i0, nq
  int64_t T;
  int Dn, P, Dv;
  float scale;
};

// Dynamic shared memory in floats: Q [BQ][Dk+1], K [BK][Dk+1], V [BK][Dv], P [BQ][BK+1].
inline size_t prefill_smem_bytes(int Dk, int Dv) {
  return sizeof(float) * (size_t(kPfBQ) * (Dk + 1) + size_t(kPfBK) * (Dk + 1) + size_t(kPfBK) * Dv + size_t(kPfBQ) * (kPfBK + 1));
}

__global__ void __launch_bounds__(kPfThreads) mla_prefill_attn_kernel(const PrefillParams p) {
  extern __shared__ float sm[];
  const int Dk = p.Dn + p.P, Dv = p.Dv, ldk = Dk + 1, ldp = kPfBK + 1;
  float* Qs = sm;                 // [BQ][ldk]
  float* Ks = Qs + kPfBQ * ldk;   // [BK][ldk]
  float* Vs = Ks + kPfBK * ldk;   // [BK][Dv]
  float* Ps = Vs + kPfBK * Dv;    // [BQ][ldp]
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int h = blockIdx.y;
  const int64_t m0 = p.tiles[3 * blockIdx.x], i0 = p.tiles[3 * blockIdx.x + 1];
  const int nq = int(p.tiles[3 * blockIdx.x + 2]);
  const int64_t kvh = int64_t(h) * (p.Dn + Dv);
  const auto tok = [&](int64_t m, int64_t s0, int64_t s1) { return (m / p.T) * s0 + (m % p.T) * s1; };

  for (int idx = tid; idx < kPfBQ * Dk; idx += kPfThreads) {
    const int r = idx / Dk, k = idx % Dk;
    Qs[r * ldk + k] = r < nq ? load_f32(p.q, tok(m0 + i0 + r, p.q_s0, p.q_s1) + h * p.q_s2 + k, p.tq) * p.scale : 0.f;
  }
  float acc[4][kPfMaxDv / 16] = {};
  float mrow[4], lrow[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) mrow[i] = -INFINITY, lrow[i] = 0.f;

  const int64_t nkeys = i0 + nq;  // keys 0 .. nkeys-1 of the sequence (causal)
  for (int64_t k0 = 0; k0 < nkeys; k0 += kPfBK) {
    __syncthreads();  // the previous tile's K, V, P are no longer read
    for (int idx = tid; idx < kPfBK * Dk; idx += kPfThreads) {
      const int j = idx / Dk, k = idx % Dk;
      const int64_t kj = k0 + j;
      float v = 0.f;
      if (kj < nkeys)
        v = k < p.Dn ? p.kv[(m0 + kj) * p.ldkv + kvh + k] : load_f32(p.pe, tok(m0 + kj, p.p_s0, p.p_s1) + (k - p.Dn), p.tp);
      Ks[j * ldk + k] = v;
    }
    for (int idx = tid; idx < kPfBK * Dv; idx += kPfThreads) {
      const int j = idx / Dv, e = idx % Dv;
      const int64_t kj = k0 + j;
      Vs[j * Dv + e] = kj < nkeys ? p.kv[(m0 + kj) * p.ldkv + kvh + p.Dn + e] : 0.f;
    }
    __syncthreads();

    float s[4][4] = {};
    for (int k = 0; k < Dk; ++k) {
      float qv[4], kvv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) qv[i] = Qs[(ty * 4 + i) * ldk + k];
#pragma unroll
      for (int c = 0; c < 4; ++c) kvv[c] = Ks[(tx + 16 * c) * ldk + k];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int c = 0; c < 4; ++c) s[i][c] = fmaf(qv[i], kvv[c], s[i][c]);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = ty * 4 + i;
      const int64_t qi = i0 + r;  // query position within the sequence
      float mx = -INFINITY;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int64_t kj = k0 + tx + 16 * c;
        if (r >= nq || kj > qi) s[i][c] = -INFINITY;
        mx = fmaxf(mx, s[i][c]);
      }
#pragma unroll
      for (int o = 8; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));  // the row's 16 lanes
      const float mnew = fmaxf(mrow[i], mx);
      const float mref = mnew == -INFINITY ? 0.f : mnew;  // a row with no key yet: every p is 0, no NaN
      const float alpha = expf(mrow[i] - mref);
      float sum = 0.f;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const float e = expf(s[i][c] - mref);
        Ps[r * ldp + tx + 16 * c] = e;
        sum += e;
      }
#pragma unroll
      for (int o = 8; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
      lrow[i] = lrow[i] * alpha + sum;
      mrow[i] = mnew;
#pragma unroll
      for (int c = 0; c < kPfMaxDv / 16; ++c) acc[i][c] *= alpha;
    }
    __syncthreads();
    const int jmax = int(nkeys - k0 < kPfBK ? nkeys - k0 : kPfBK);
    for (int j = 0; j < jmax; ++j) {
      float pv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) pv[i] = Ps[(ty * 4 + i) * ldp + j];
#pragma unroll
      for (int c = 0; c < kPfMaxDv / 16; ++c) {
        const int e = tx + 16 * c;
        const float v = e < Dv ? Vs[j * Dv + e] : 0.f;
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[i][c] = fmaf(pv[i], v, acc[i][c]);
      }
    }
  }

#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = ty * 4 + i;
    if (r >= nq) continue;
    const int64_t m = m0 + i0 + r;
    const float inv = 1.f / lrow[i];
#pragma unroll
    for (int c = 0; c < kPfMaxDv / 16; ++c) {
      const int e = tx + 16 * c;
      if (e >= Dv) continue;
      float v = acc[i][c] * inv;
      if (p.gate) v *= 1.f / (1.f + expf(-load_f32(p.gate, tok(m, p.g_s0, p.g_s1) + int64_t(h) * Dv + e, p.tg)));
      store_f32(p.o, tok(m, p.o_s0, p.o_s1) + h * p.o_s2 + e, p.to, v);
    }
  }
}

}  // namespace kimi::cuda::mla
