// src/cuda/conv/conv_step.cuh: one channel's short-conv decode step (kimi/ops/conv.h short_conv_update,
// SPEC 4), for the conv_update kernel (the fused KDA decode step, src/cuda/kda/decode_step.cuh, has its own
// loads-first form of the same arithmetic, in the same tap order):
//   hist = cache[0 .. W-2]  (oldest first)
//   y    = act(sum_{j < W-1} w[j] * hist[j] + w[W-1] * x)      fp32, tap order j = 0 .. W-1 (the CPU order)
//   cache[0 .. W-2] = [hist[1 .. W-2], x]                      in place (the caller owns this channel's row)
// Weights at w + w0 + j * w_j, cache at cache + c0 + j * c_j (elements; dtypes as ElemType codes).
// W in [1, kConvMaxWidth]; with W = 1 the cache is not touched (it may be null).
#pragma once

#include <cstdint>

#include "cuda/elementwise.cuh"

namespace kimi::cuda {

inline constexpr int kConvMaxWidth = 8;  // kimi/ops/conv.h: W in [1, 8]

__device__ __forceinline__ float conv_step(float x, const void* w, int tw, int64_t w0, int64_t w_j, void* cache,
                                           int tc, int64_t c0, int64_t c_j, int W, bool silu) {
  // Unrolled over the largest width with guards, so that hist stays in registers for any W.
  float hist[kConvMaxWidth - 1];
#pragma unroll
  for (int j = 0; j < kConvMaxWidth - 1; ++j) hist[j] = j < W - 1 ? load_f32(cache, c0 + j * c_j, tc) : 0.f;
  float acc = 0.f;
#pragma unroll
  for (int j = 0; j < kConvMaxWidth - 1; ++j)
    if (j < W - 1) acc += load_f32(w, w0 + j * w_j, tw) * hist[j];
  acc += load_f32(w, w0 + (W - 1) * w_j, tw) * x;
  if (silu) acc = acc * sigmoid_f32(acc);
#pragma unroll
  for (int j = 0; j + 1 < kConvMaxWidth - 1; ++j)
    if (j + 1 < W - 1) store_f32(cache, c0 + j * c_j, tc, hist[j + 1]);
  if (W > 1) store_f32(cache, c0 + (W - 2) * c_j, tc, x);
  return acc;
}

}  // namespace kimi::cuda
