// src/cuda/moe/router.cuh: the sigmoid top-k router (SPEC 7), one warp per token.
//   s_e = sigmoid(logit_e) (f32);  key_e = s_e + bias_e (NaN ranks below every number)
//   sel = the k largest keys in descending order, equal keys by lower index (the CPU's top_k)
//   w_j = s_{sel_j} (unbiased); renormalize: w_j / (sum_j w_j + 1e-20) in fp64 as the CPU; then * scaling.
// Round j picks the best (key, index) strictly below round j-1's pick in that total order, so no
// "already selected" flags are needed: each round rescans the row (E / 32 values per lane, L1-resident).
#pragma once

#include <cstdint>

#include "cuda/elementwise.cuh"

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

constexpr int kRouterWarps = 4;

__global__ void __launch_bounds__(kRouterWarps * 32) router_kernel(RouterArgs a) {
  const int64_t t = int64_t(blockIdx.x) * kRouterWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (t >= a.t) return;
  const int64_t none = INT64_MAX;
  float prev_key = 0.f;
  int64_t prev = -1;  // -1: nothing selected yet
  int32_t* ids = a.ids + t * a.ldi;
  float* w = a.w + t * a.ldw;
  for (int j = 0; j < a.k; ++j) {
    float bk = -INFINITY;
    int64_t bi = none;
    for (int64_t e = lane; e < a.e; e += 32) {
      const float s = router_sigmoid(load_f32(a.logits, t * a.ldl + e, a.tl));
      const float key = router_key(a.bias ? s + a.bias[e * a.bias_stride] : s);
      if (prev >= 0 && !router_before(prev_key, prev, key, e)) continue;  // selected in an earlier round
      if (bi == none || router_before(key, e, bk, bi)) bk = key, bi = e;
    }
#pragma unroll
    for (int o = 16; o > 0; o /= 2) {
      const float ok = __shfl_xor_sync(0xffffffffu, bk, o);
      const int64_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (oi != none && (bi == none || router_before(ok, oi, bk, bi))) bk = ok, bi = oi;
    }
    prev_key = bk;
    prev = bi;
    if (lane == 0) {
      ids[j] = int32_t(bi);
      w[j] = router_sigmoid(load_f32(a.logits, t * a.ldl + bi, a.tl));  // unbiased score, normalized below
    }
  }
  if (lane != 0) return;
  double sum = 0;
  for (int j = 0; j < a.k; ++j) sum += double(w[j]);
  for (int j = 0; j < a.k; ++j) w[j] = (a.renorm ? float(double(w[j]) / (sum + 1e-20)) : w[j]) * a.scaling;
}

}  // namespace kimi::cuda
