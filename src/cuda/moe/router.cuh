// src/cuda/moe/router.cuh: the sigmoid top-k router (SPEC 7), one warp per token.
//   s_e = sigmoid(logit_e) (f32);  key_e = s_e + bias_e (NaN ranks below every number)
//   sel = the k largest keys in descending order, equal keys by lower index (the CPU's top_k)
//   w_j = s_{sel_j} (unbiased); renormalize: w_j / (sum_j w_j + 1e-20) in fp64 as the CPU; then * scaling.
// The total order: (key, index) before (key', index') when key > key', or equal keys and index < index'. It is
// encoded in one u64 (order_bits(key) << 32 | ~index), so "before" is "larger" and a pick is a warp max.
// router_reg_kernel<PL> (E <= 32 PL, k <= 32: every Kimi config; the launcher picks PL in {8, 16, 32}): lane l
//   holds the keys of experts l, l + 32, ... in registers, computed once; round j takes each lane's best
//   unselected key, a warp max of the packed keys, and the owner lane marks it selected. Lane j keeps pick j's
//   score; the fp64 sum runs over the picks in order (the CPU's summation order, so bit-equal weights).
// router_kernel (any E and k): round j rescans the row for the best (key, index) strictly below round j-1's pick
//   (E / 32 values per lane from L1), so no "already selected" flags are needed.
#pragma once

#include <cstdint>

#include "cuda/elementwise.cuh"
#include "cuda/moe/router_row.cuh"
#include "cuda/pdl.cuh"

namespace kimi::cuda {

constexpr int kRouterWarps = 4;

// PL: experts per lane (E <= 32 PL); k <= 32.
template <int PL>
__global__ void __launch_bounds__(kRouterWarps * 32) router_reg_kernel(RouterArgs a) {
  pdl_launch_dependents();  // pdl.cuh: launched with programmatic_launch
  pdl_wait();
  const int64_t t = int64_t(blockIdx.x) * kRouterWarps + threadIdx.x / 32;
  if (t >= a.t) return;
  router_reg_row<PL>(a, t, int(threadIdx.x % 32));
}

__global__ void __launch_bounds__(kRouterWarps * 32) router_kernel(RouterArgs a) {
  pdl_launch_dependents();  // pdl.cuh: launched with programmatic_launch
  pdl_wait();
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
