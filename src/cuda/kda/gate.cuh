// src/cuda/kda/gate.cuh: the KDA gate and beta activations (SPEC 5, kimi/ops/kda.h), one warp per row.
//   kda_gate: f, g [..., H, K] (row = one head of one token, h = row % H), x = f + dt_bias[h, i], a = exp(A_log[h])
//     softplus: g = -a * softplus(x) = -a * (max(x, 0) + log1p(exp(-|x|)))
//     bounded:  g = lb * sigmoid(a x) = lb / (1 + exp(-a x))
//   kda_beta: b, beta [..., H] (row = one token): beta = sigmoid(b) = 1 / (1 + exp(-b))
// Rows at element offsets (any leading strides), last dim contiguous; dtypes as codes; fp32 math with the
// accurate expf / log1pf (the f32 bar is 1e-5 relative against fp64).
#pragma once

#include "cuda/rows.cuh"

#include "cuda/elementwise.cuh"

namespace kimi::cuda {

enum KdaGateCode : int { kda_gate_softplus = 0, kda_gate_bounded = 1 };

__global__ void kda_gate_kernel(const void* f, int tf, RowMap f_off, const float* A_log, int64_t a_stride,
                                const float* dt_bias, int form, float lb, void* g, int tg, RowMap g_off,
                                int64_t rows, int H, int K) {
  const int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int h = int(row % H);
  const float a = expf(A_log[h * a_stride]);
  for (int i = lane; i < K; i += 32) {
    const float x = load_f32(f, f_off[row] + i, tf) + dt_bias[int64_t(h) * K + i];
    const float v = form == kda_gate_bounded ? lb / (1.f + expf(-a * x)) : -a * (fmaxf(x, 0.f) + log1pf(expf(-fabsf(x))));
    store_f32(g, g_off[row] + i, tg, v);
  }
}

__global__ void kda_beta_kernel(const void* b, int tb, RowMap b_off, void* beta, int tbeta,
                                RowMap beta_off, int64_t rows, int H) {
  const int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  for (int i = lane; i < H; i += 32)
    store_f32(beta, beta_off[row] + i, tbeta, 1.f / (1.f + expf(-load_f32(b, b_off[row] + i, tb))));
}

}  // namespace kimi::cuda
