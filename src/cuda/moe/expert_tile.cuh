// src/cuda/moe/expert_tile.cuh: the expert weight pointers and the steps of the FFMA weight stream that the two
// decode expert kernels share (grouped.cuh: one grid row per expert; touched.cuh: one per touched expert). A thread
// streams its part of an expert's weight tile once for a group of up to MT grouped rows, holding acc[R][MT]
// (R = P * NR weight rows: NR output columns of each of the P projections, j = p NR + r; rows i >= m of a short
// group are never read or summed), then reduces the sums per row:
//   set_weight_args: an expert projection as gemv.cuh's weight arguments (WF::load / WF::scalar read them);
//   load_chunk:      one chunk (WF::kChunk consecutive columns from column c, a multiple of the chunk) of every
//                    weight row, all R loads issued before any arithmetic;
//   tail_weights:    one column c of every weight row by scalar loads (tails and unaligned rows);
//   warp_sums:       the butterfly sum (xor 16, 8, 4, 2, 1) of each acc[j][i], i < m, over the warp's lanes; lane 0
//                    stores it to red_w[j MT + i] (shared memory) and the caller adds the warps' sums in its order.
// The kernels keep their own FMA loops (acc[j][i] += w_j[c + q] x_i[c + q], q in order, one fmaf each): as
// functions they compile to the same arithmetic with other register assignments (ptxas), so they stay inline.
//
// Expert weights: ExpertProj gives expert e's pointers either from a base and a byte stride (stacked experts: one
// allocation per projection, as place_weights builds) or from a device table of ExpertPtr (experts allocated
// separately; the launcher uploads it per call). Both read the same bytes: the same results.
#pragma once

#include <cstdint>

#include "cuda/linear/gemv.cuh"

namespace kimi::cuda {

// One projection of one expert: dense [n, k] (rows ldw elements apart) or MXFP4 packed [n, k/2] (rows ldw bytes
// apart) with scale [n, k/32] (rows lds bytes apart; null for dense).
struct ExpertPtr {
  const void* w;
  const uint8_t* scale;
  int64_t ldw, lds;
};

// One projection of every expert: table[e] when table is set, else expert 0's pointers advanced by e strides.
struct ExpertProj {
  ExpertPtr first;
  int64_t w_stride, s_stride;  // bytes between consecutive experts (stacked form)
  const ExpertPtr* table;      // device [E] (separately allocated experts) or null
};

__device__ __forceinline__ ExpertPtr expert_ptr(const ExpertProj& p, int e) {
  if (p.table) return p.table[e];
  ExpertPtr r = p.first;
  r.w = static_cast<const char*>(r.w) + int64_t(e) * p.w_stride;
  if (r.scale) r.scale += int64_t(e) * p.s_stride;
  return r;
}

// wa = an expert projection as the weight fields of gemv.cuh's GemvArgs (what WF::load / WF::scalar read), the
// other fields zero.
__device__ __forceinline__ void set_weight_args(GemvArgs& wa, const ExpertPtr& ep) {
  wa = GemvArgs{};
  wa.w = ep.w;
  wa.ldw = ep.ldw;
  wa.scale = ep.scale;
  wa.lds = ep.lds;
}

template <int P, int NR, class WF>
__device__ __forceinline__ void load_chunk(const GemvArgs (&wa)[P], const int64_t (&rows)[NR], int64_t c,
                                           typename WF::Raw (&raw)[P * NR]) {
#pragma unroll
  for (int p = 0; p < P; ++p)
#pragma unroll
    for (int r = 0; r < NR; ++r) WF::load(wa[p], rows[r], c, raw[p * NR + r]);
}

template <int P, int NR, class WF>
__device__ __forceinline__ void tail_weights(const GemvArgs (&wa)[P], const int64_t (&rows)[NR], int64_t c,
                                             float (&wv)[P * NR]) {
#pragma unroll
  for (int p = 0; p < P; ++p)
#pragma unroll
    for (int r = 0; r < NR; ++r) wv[p * NR + r] = WF::scalar(wa[p], rows[r], c);
}

template <int R, int MT>
__device__ __forceinline__ void warp_sums(const float (&acc)[R][MT], int m, int lane, float (&red_w)[R * MT]) {
#pragma unroll
  for (int j = 0; j < R; ++j)
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      if (i >= m) break;
      float v = acc[j][i];
#pragma unroll
      for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
      if (lane == 0) red_w[j * MT + i] = v;
    }
}

}  // namespace kimi::cuda
