// src/cuda/moe/router_row.cuh: the router's arguments, order key and per-token warp routine (router.cuh's math);
// the arguments and key are shared with router_rank.cuh (the touched path's grouping launch, group.cuh, which
// routes the few decode tokens itself). Device functions only: safe to include in several translation units.
#pragma once

#include <cstdint>

#include "cuda/elementwise.cuh"
#include "kimi/ops/moe.h"
#include "kimi/tensor.h"

namespace kimi::cuda {

struct RouterArgs {
  const void* logits;  // [t, e], dtype code tl, rows ldl apart
  int tl;
  int64_t ldl;
  const float* bias;  // [e] (stride bias_stride) or null
  int64_t bias_stride;
  int64_t t, e;
  int k;
  int renorm;
  float scaling;
  int32_t* ids;  // [t, k] rows ldi apart
  int64_t ldi;
  float* w;  // [t, k] rows ldw apart
  int64_t ldw;
};

__device__ __forceinline__ float router_sigmoid(float v) { return 1.f / (1.f + expf(-v)); }
__device__ __forceinline__ float router_key(float v) { return isnan(v) ? -INFINITY : v; }
// (ka, ia) comes before (kb, ib): larger key, or equal key and lower index.
__device__ __forceinline__ bool router_before(float ka, int64_t ia, float kb, int64_t ib) {
  return ka > kb || (ka == kb && ia < ib);
}

// The packed order key: larger u64 = earlier in the order. Keys are never NaN (router_key).
__device__ __forceinline__ uint64_t router_pack(float key, int64_t index) {
  if (key == 0.f) key = 0.f;  // -0 and +0 are equal keys
  uint32_t b = __float_as_uint(key);
  b = (b & 0x80000000u) ? ~b : (b | 0x80000000u);  // monotone: float order = unsigned order
  return (uint64_t(b) << 32) | uint64_t(~uint32_t(index));
}
__device__ __forceinline__ int64_t router_unpack_index(uint64_t packed) { return int64_t(~uint32_t(packed)); }

// Token t's routing by the warp of lane `lane` (every lane of the warp calls it; PL experts per lane, E <= 32 PL,
// k <= 32): lane l holds the keys of experts l, l + 32, ... in registers, computed once; round j takes each
// lane's best unselected key, a warp max of the packed keys, and the owner lane marks it selected. Lane j keeps
// pick j's score; the fp64 sum runs over the picks in order (the CPU's summation order, so bit-equal weights).
template <int PL>
__device__ __forceinline__ void router_reg_row(const RouterArgs& a, int64_t t, int lane) {
  uint64_t key[PL];  // packed (key, index) of experts lane + 32 i; 0 = absent or already selected
  float score[PL];   // s_e, the unbiased weight
#pragma unroll
  for (int i = 0; i < PL; ++i) {
    const int64_t e = lane + 32 * i;
    key[i] = 0, score[i] = 0.f;
    if (e < a.e) {
      score[i] = router_sigmoid(load_f32(a.logits, t * a.ldl + e, a.tl));
      key[i] = router_pack(router_key(a.bias ? score[i] + a.bias[e * a.bias_stride] : score[i]), e);
    }
  }
  int32_t my_id = 0;
  float my_w = 0.f;  // lane j: pick j
  for (int j = 0; j < a.k; ++j) {
    uint64_t best = 0;
    float best_s = 0.f;
#pragma unroll
    for (int i = 0; i < PL; ++i)
      if (key[i] > best) best = key[i], best_s = score[i];
    uint64_t win = best;
#pragma unroll
    for (int o = 16; o > 0; o /= 2) win = max(win, __shfl_xor_sync(0xffffffffu, win, o));
    const int64_t e = router_unpack_index(win);
    const float s = __shfl_sync(0xffffffffu, best_s, int(e % 32));
    if (lane == int(e % 32)) {
#pragma unroll
      for (int i = 0; i < PL; ++i)
        if (i == e / 32) key[i] = 0;
    }
    if (lane == j) my_id = int32_t(e), my_w = s;
  }
  double sum = 0;  // the CPU's order: picks 0 .. k-1
  for (int j = 0; j < a.k; ++j) sum += double(__shfl_sync(0xffffffffu, my_w, j));
  if (lane >= a.k) return;
  a.ids[t * a.ldi + lane] = my_id;
  a.w[t * a.ldw + lane] = (a.renorm ? float(double(my_w) / (sum + 1e-20)) : my_w) * a.scaling;
}

// The arguments of routing logits [t, e] into ids i32 [t, k] and weights f32 [t, k] (views validated by the caller).
inline RouterArgs router_args(const TensorView& logits, const TensorView& bias, const RouterParams& p,
                              const TensorView& ids, const TensorView& weights) {
  const int64_t t = logits.size(0), e = logits.size(1);
  RouterArgs a{};
  a.logits = logits.data;
  a.tl = elem_type(logits.dtype);
  a.ldl = t > 1 ? logits.stride(0) : e;
  a.bias = bias.present() ? static_cast<const float*>(bias.data) : nullptr;
  a.bias_stride = bias.present() ? bias.stride(0) : 0;
  a.t = t;
  a.e = e;
  a.k = p.top_k;
  a.renorm = p.renormalize ? 1 : 0;
  a.scaling = p.scaling;
  a.ids = static_cast<int32_t*>(ids.data);
  a.ldi = t > 1 ? ids.stride(0) : p.top_k;
  a.w = static_cast<float*>(weights.data);
  a.ldw = t > 1 ? weights.stride(0) : p.top_k;
  return a;
}

}  // namespace kimi::cuda
