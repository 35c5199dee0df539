// src/cuda/norm/gated_rms.cuh: the per-element math of the per-head gated RMSNorm (SPEC 3, KDA output),
// shared by gated_rms_norm.cuh (a warp per row) and the fused KDA decode step (src/cuda/kda/decode_step.cuh):
//   r = rsqrt(sum_sq / d + eps)                          sum_sq = sum of o^2 over the row's d elements
//   y = o * r * w * sigmoid(z)                           fp32 throughout (no rounding before w); no gate without z
#pragma once

#include "cuda/elementwise.cuh"

namespace kimi::cuda {

__device__ __forceinline__ float gated_rms_scale(float sum_sq, int d, float eps) { return rsqrtf(sum_sq / float(d) + eps); }

__device__ __forceinline__ float gated_rms_out(float o, float r, float w, bool has_z, float z) {
  float v = o * r * w;
  if (has_z) v *= sigmoid_f32(z);
  return v;
}

}  // namespace kimi::cuda
