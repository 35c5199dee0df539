// src/cuda/kda/kda_device.cuh: device helpers shared by the KDA kernels (recurrent.cuh, decode_step.cuh):
// the fused gate and beta, the per-token L2-norm / scale factors, 4-wide fp32 state accesses, and the vk
// kernels' per-lane K slots (token loads, decay + k / q dots over a column, the delta update).
//
//   gate_log:  bounded   g = lower_bound * sigmoid(exp(A_log) * (f + dt_bias))
//              softplus  g = -exp(A_log) * softplus(f + dt_bias)          (softplus(x) = x for x > 20)
//              none      g = f                                            (expA = exp(A_log[h]) is passed in)
//   beta_sigmoid: 1 / (1 + exp(-b))
//   token_factors: from sqq = q.q, skk = k.k, sqk = q.k of the raw (un-normalized) q, k:
//     rq = scale / sqrt(sqq + 1e-6), rk = 1 / sqrt(skk + 1e-6) (l2norm; else rq = scale, rk = 1),
//     qk = sqk * rq * rk (the normalized, scaled q.k)
#pragma once

#include <cstdint>

namespace kimi::cuda::kda_detail {

enum GateCode : int { gate_none = 0, gate_bounded = 1, gate_softplus = 2 };

__device__ __forceinline__ float gate_log(int gate, float f, float dt_bias, float expA, float lower_bound) {
  if (gate == gate_bounded) {
    const float x = expA * (f + dt_bias);
    return lower_bound / (1.f + expf(-x));
  }
  if (gate == gate_softplus) {
    const float x = f + dt_bias;
    return -expA * (x > 20.f ? x : log1pf(expf(x)));
  }
  return f;
}

__device__ __forceinline__ float beta_sigmoid(float b) { return 1.f / (1.f + expf(-b)); }

// The per-token scalars: rq, rk (norm and scale factors), qk (normalized q.k), beta.
struct TokenScalars {
  float rq, rk, qk, beta;
};
// The token's sums q.q, k.k, q.k over a CTA: each thread's parts summed over its warp (xor butterfly), lane 0 storing
// the warp's three in `slot` (its row of a [warps][3] array); after a barrier, token_sums adds the warps' in warp
// order.
__device__ __forceinline__ void warp_token_sums(float sqq, float skk, float sqk, int lane, float (&slot)[3]) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) {
    sqq += __shfl_xor_sync(0xffffffffu, sqq, o);
    skk += __shfl_xor_sync(0xffffffffu, skk, o);
    sqk += __shfl_xor_sync(0xffffffffu, sqk, o);
  }
  if (lane == 0) slot[0] = sqq, slot[1] = skk, slot[2] = sqk;
}
template <int W>
__device__ __forceinline__ void token_sums(const float (&sums)[W][3], float& sqq, float& skk, float& sqk) {
  sqq = skk = sqk = 0.f;
#pragma unroll
  for (int w = 0; w < W; ++w) {
    sqq += sums[w][0];
    skk += sums[w][1];
    sqk += sums[w][2];
  }
}
__device__ __forceinline__ TokenScalars token_factors(float sqq, float skk, float sqk, float scale, bool l2norm,
                                                      float beta) {
  TokenScalars s;
  s.rq = scale;
  s.rk = 1.f;
  if (l2norm) {
    s.rq = scale / sqrtf(sqq + 1e-6f);
    s.rk = 1.f / sqrtf(skk + 1e-6f);
  }
  s.qk = sqk * s.rq * s.rk;
  s.beta = beta;
  return s;
}

// 4 consecutive fp32 state elements, `valid` of them in range (0..4); 16-byte streaming access when
// `vec` (then the address is 16-byte aligned) and all 4 are valid, else guarded scalars (zeros).
__device__ __forceinline__ float4 ld_state4(const float* p, int64_t off, int valid, int vec) {
  if (vec && valid == 4) return __ldcs(reinterpret_cast<const float4*>(p + off));
  float4 r = make_float4(0.f, 0.f, 0.f, 0.f);
  if (valid > 0) r.x = p[off];
  if (valid > 1) r.y = p[off + 1];
  if (valid > 2) r.z = p[off + 2];
  if (valid > 3) r.w = p[off + 3];
  return r;
}
__device__ __forceinline__ void st_state4(float* p, int64_t off, int valid, int vec, float4 r) {
  if (vec && valid == 4) {
    __stcs(reinterpret_cast<float4*>(p + off), r);
    return;
  }
  if (valid > 0) p[off] = r.x;
  if (valid > 1) p[off + 1] = r.y;
  if (valid > 2) p[off + 2] = r.z;
  if (valid > 3) p[off + 3] = r.w;
}
__device__ __forceinline__ int clamp4(int x) { return x < 0 ? 0 : (x > 4 ? 4 : x); }
__device__ __forceinline__ float& comp(float4& x, int e) { return e == 0 ? x.x : e == 1 ? x.y : e == 2 ? x.z : x.w; }
__device__ __forceinline__ float comp(const float4& x, int e) {
  return e == 0 ? x.x : e == 1 ? x.y : e == 2 ? x.z : x.w;
}

// The vk kernels (recurrent.cuh, decode_step.cuh): a lane holds K slots c = 0 .. KC - 1 of 4 rows each, rows
// 4 kg + 4 KG c + e, of its state columns; the KG lanes of a column are one aligned group of a warp.
// This lane's decay a, k and q of those rows from the token's shared arrays (16-byte loads; KMAX a multiple of 4).
template <int KC, int KG>
__device__ __forceinline__ void vk_token_slots(const float* sa, const float* sk, const float* sq, int kg,
                                               float (&a)[KC][4], float (&kk)[KC][4], float (&qq)[KC][4]) {
#pragma unroll
  for (int c = 0; c < KC; ++c) {
    const int i0 = 4 * kg + 4 * KG * c;
    const float4 a4 = *reinterpret_cast<const float4*>(sa + i0);
    const float4 k4 = *reinterpret_cast<const float4*>(sk + i0);
    const float4 q4 = *reinterpret_cast<const float4*>(sq + i0);
    a[c][0] = a4.x, a[c][1] = a4.y, a[c][2] = a4.z, a[c][3] = a4.w;
    kk[c][0] = k4.x, kk[c][1] = k4.y, kk[c][2] = k4.z, kk[c][3] = k4.w;
    qq[c][0] = q4.x, qq[c][1] = q4.y, qq[c][2] = q4.z, qq[c][3] = q4.w;
  }
}
// The vk kernels' state tile of a thread in global memory: columns jt + VG m (m < NV), K slots 4 kg + 4 KG c (c < KC);
// `at` points at its first element (column jt, K slot 4 kg), columns ld floats apart. 16-byte streaming accesses
// where every element exists and vec allows them, else ld_state4 / st_state4 with the valid counts.
template <int KG, int KC, int NV, int VG>
__device__ __forceinline__ void vk_load(float4 (&S)[NV][KC], const float* at, int64_t ld, int K, int V, int jt, int kg,
                                        int vec) {
  const int64_t step = VG * ld;
  if (vec && 4 * kg + 4 * KG * (KC - 1) + 4 <= K && jt + VG * (NV - 1) < V) {
#pragma unroll
    for (int m = 0; m < NV; ++m)
#pragma unroll
      for (int c = 0; c < KC; ++c) S[m][c] = __ldcs(reinterpret_cast<const float4*>(at + m * step + 4 * KG * c));
  } else {
#pragma unroll
    for (int m = 0; m < NV; ++m)
#pragma unroll
      for (int c = 0; c < KC; ++c)
        S[m][c] = ld_state4(at, m * step + 4 * KG * c, jt + VG * m < V ? clamp4(K - 4 * kg - 4 * KG * c) : 0, vec);
  }
}
template <int KG, int KC, int NV, int VG>
__device__ __forceinline__ void vk_store(const float4 (&S)[NV][KC], float* at, int64_t ld, int K, int V, int jt, int kg,
                                         int vec) {
  const int64_t step = VG * ld;
  if (vec && 4 * kg + 4 * KG * (KC - 1) + 4 <= K && jt + VG * (NV - 1) < V) {
#pragma unroll
    for (int m = 0; m < NV; ++m)
#pragma unroll
      for (int c = 0; c < KC; ++c) __stcs(reinterpret_cast<float4*>(at + m * step + 4 * KG * c), S[m][c]);
  } else {
#pragma unroll
    for (int m = 0; m < NV; ++m)
#pragma unroll
      for (int c = 0; c < KC; ++c)
        st_state4(at, m * step + 4 * KG * c, jt + VG * m < V ? clamp4(K - 4 * kg - 4 * KG * c) : 0, vec, S[m][c]);
  }
}
// The kv kernels' state tile of a thread in global memory (recurrent.cuh, decode_step.cuh): rows rg + RG r (r < NR),
// columns jc .. jc + 3; `at` points at its first element (row rg, column jc), rows ld floats apart. The columns are
// all valid when jc + 4 <= V (the 16-byte path, where vec allows it and every row exists), some when jc < V. The
// tests are written as plain comparisons of jc and V, not as a clamped count compared with 4: in the SASS of that
// form the 16-byte path's branch predicate was the predicate output of the VIMNMX computing the clamp, and on the
// H200 lanes past V took that path and wrote 16 bytes of the next state row (docs/gpu/2026-11-29-h200-diag1.txt).
__device__ __forceinline__ int kv_valid_cols(int jc, int V) { return jc >= V ? 0 : (V - jc >= 4 ? 4 : V - jc); }
template <int NR, int RG>
__device__ __forceinline__ void kv_load(float4 (&S)[NR], const float* at, int64_t ld, int V, int K, int rg, int jc,
                                        int vec) {
  const int64_t step = RG * ld;
  const int vcols = kv_valid_cols(jc, V);
  if (vec && jc + 4 <= V && rg + RG * (NR - 1) < K) {
#pragma unroll
    for (int r = 0; r < NR; ++r) S[r] = __ldcs(reinterpret_cast<const float4*>(at + r * step));
  } else {
#pragma unroll
    for (int r = 0; r < NR; ++r) S[r] = ld_state4(at, r * step, rg + RG * r < K ? vcols : 0, vec);
  }
}
template <int NR, int RG>
__device__ __forceinline__ void kv_store(const float4 (&S)[NR], float* at, int64_t ld, int V, int K, int rg, int jc,
                                         int vec) {
  const int64_t step = RG * ld;
  const int vcols = kv_valid_cols(jc, V);
  if (vec && jc + 4 <= V && rg + RG * (NR - 1) < K) {
#pragma unroll
    for (int r = 0; r < NR; ++r) __stcs(reinterpret_cast<float4*>(at + r * step), S[r]);
  } else {
#pragma unroll
    for (int r = 0; r < NR; ++r) st_state4(at, r * step, rg + RG * r < K ? vcols : 0, vec, S[r]);
  }
}
// One column's slots: decay in place (S *= a), and k^T S, q^T S summed over the column's KG lanes (every lane of
// the group gets the sums).
template <int KC, int KG>
__device__ __forceinline__ void vk_decay_dots(float4 (&S)[KC], const float (&a)[KC][4], const float (&kk)[KC][4],
                                              const float (&qq)[KC][4], float& pk, float& pq) {
  pk = 0.f, pq = 0.f;
#pragma unroll
  for (int c = 0; c < KC; ++c)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float& x = comp(S[c], e);
      x *= a[c][e];
      pk = fmaf(kk[c][e], x, pk);
      pq = fmaf(qq[c][e], x, pq);
    }
#pragma unroll
  for (int o = 1; o < KG; o *= 2) {
    pk += __shfl_xor_sync(0xffffffffu, pk, o);
    pq += __shfl_xor_sync(0xffffffffu, pq, o);
  }
}
// One column's delta-rule update S += b k (b = beta rk e_j of the column).
template <int KC>
__device__ __forceinline__ void vk_add_k(float4 (&S)[KC], const float (&kk)[KC][4], float b) {
#pragma unroll
  for (int c = 0; c < KC; ++c)
#pragma unroll
    for (int e = 0; e < 4; ++e) comp(S[c], e) = fmaf(b, kk[c][e], comp(S[c], e));
}

// The kv register kernels (recurrent.cuh, decode_step.cuh): a thread holds 4 columns of NR rows i = rg + RG r of the
// state (S[r]); a, k, q of the token by row (shared memory). Decays its rows in place and returns the partial
// k^T Sd, q^T Sd of its 4 columns summed over the warp's row groups (lanes differing in the bits above the CG column
// groups).
template <int NR, int RG, int CG>
__device__ __forceinline__ void kv_decay_dots(float4 (&S)[NR], const float* a, const float* k, const float* q, int rg,
                                              float (&pk)[4], float (&pq)[4]) {
#pragma unroll
  for (int e = 0; e < 4; ++e) pk[e] = 0.f, pq[e] = 0.f;
#pragma unroll
  for (int r = 0; r < NR; ++r) {
    const int i = rg + RG * r;
    const float ai = a[i], ki = k[i], qi = q[i];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float& x = comp(S[r], e);
      x *= ai;
      pk[e] = fmaf(ki, x, pk[e]);
      pq[e] = fmaf(qi, x, pq[e]);
    }
  }
#pragma unroll
  for (int o = CG; o < 32; o *= 2) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      pk[e] += __shfl_xor_sync(0xffffffffu, pk[e], o);
      pq[e] += __shfl_xor_sync(0xffffffffu, pq[e], o);
    }
  }
}

// The kv register kernels' delta-rule update of the thread's rows: S[r] += k_i b (b = beta rk e of its 4 columns).
template <int NR, int RG>
__device__ __forceinline__ void kv_add_k(float4 (&S)[NR], const float* k, int rg, float4 b) {
#pragma unroll
  for (int r = 0; r < NR; ++r) {
    const float ki = k[rg + RG * r];
    S[r].x = fmaf(ki, b.x, S[r].x);
    S[r].y = fmaf(ki, b.y, S[r].y);
    S[r].z = fmaf(ki, b.z, S[r].z);
    S[r].w = fmaf(ki, b.w, S[r].w);
  }
}

}  // namespace kimi::cuda::kda_detail
