// src/cuda/kda/gate.cuh: the KDA gate and beta activations (SPEC 5, kimi/ops/kda.h), one warp per row.
//   kda_gate: f, g [..., H, K] (row = one head of one token, h = row % H), x = f + dt_bias[h, i], a = exp(A_log[h])
//     softplus: g = -a * softplus(x) = -a * (max(x, 0) + log1p(exp(-|x|)))
//     bounded:  g = lb * sigmoid(a x) = lb / (1 + exp(-a x))
//   kda_beta: b, beta [..., H] (row = one token): beta = sigmoid(b) = 1 / (1 + exp(-b))
// Rows at element offsets (any leading strides), last dim contiguous; dtypes as codes; fp32 math with the
// accurate expf / log1pf (the f32 bar is 1e-5 relative against fp64).
// kda_gate_vec_kernel / kda_beta_vec_kernel: the same math on the vectorized row launch (cuda/norm/row_vec.cuh:
// `lanes` threads per row, 8-element chunks in 16-byte accesses) when every view is vec8_view and dt_bias is
// 16-byte aligned; the one-warp-per-row kernels take any other layout.
#pragma once

#include "cuda/rows.cuh"

#include "cuda/elementwise.cuh"
#include "cuda/elementwise_vec.cuh"
#include "cuda/norm/row_vec.cuh"

namespace kimi::cuda {

enum KdaGateCode : int { kda_gate_softplus = 0, kda_gate_bounded = 1 };

__device__ __forceinline__ float kda_gate_value(float x, float a, int form, float lb) {
  return form == kda_gate_bounded ? lb / (1.f + expf(-a * x)) : -a * (fmaxf(x, 0.f) + log1pf(expf(-fabsf(x))));
}

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
    store_f32(g, g_off[row] + i, tg, kda_gate_value(x, a, form, lb));
  }
}

// kForm (a KdaGateCode) is a template parameter: a run-time form made every element its own branch, so the
// accurate expf / log1pf chains of a chunk's 8 elements could not interleave (the kernel is nearly as much
// arithmetic as memory at prefill sizes: ~40 instructions per element).
template <int kForm>
__global__ void __launch_bounds__(kRowMaxLanes) kda_gate_vec_kernel(const void* f, int tf, RowMap f_off, const float* A_log, int64_t a_stride,
                                    const float* dt_bias, float lb, void* g, int tg, RowMap g_off,
                                    int64_t rows, int H, int K, int lanes) {
  const RowSlot rs = row_slot(lanes, rows);
  if (!rs.active) return;
  const int h = int(rs.row % H);
  const float a = expf(A_log[h * a_stride]);
  const int64_t fb = row_offset(f_off, rs.row), gb = row_offset(g_off, rs.row);
  const int nch = K / kVec;
  // All raw loads of f before the first unpack (kRowChunks accesses in flight per thread); dt_bias [H, K] (L1 / L2
  // hits) chunk by chunk with the outputs, which keeps the registers (and occupancy) of the load pass.
  Raw8 raw_f[kRowChunks];
#pragma unroll
  for (int i = 0; i < kRowChunks; ++i) {
    const int q = rs.lane + i * lanes;
    if (q < nch) load_raw8(f, fb + int64_t(q) * kVec, tf, raw_f[i]);
  }
#pragma unroll
  for (int i = 0; i < kRowChunks; ++i) {
    const int q = rs.lane + i * lanes;
    if (q < nch) {
      float v[kVec], bias[kVec], out[kVec];
      load8(dt_bias, int64_t(h) * K + int64_t(q) * kVec, el_f32, bias);
      unpack8(raw_f[i], tf, v);
#pragma unroll
      for (int k = 0; k < kVec; ++k) out[k] = kda_gate_value(v[k] + bias[k], a, kForm, lb);
      store8(g, gb + int64_t(q) * kVec, tg, out);
    }
  }
}

__global__ void __launch_bounds__(kRowMaxLanes) kda_beta_vec_kernel(const void* b, int tb, RowMap b_off, void* beta, int tbeta, RowMap beta_off,
                                    int64_t rows, int H, int lanes) {
  const RowSlot rs = row_slot(lanes, rows);
  if (!rs.active) return;
  const int64_t bb = row_offset(b_off, rs.row), ob = row_offset(beta_off, rs.row);
  const int nch = H / kVec;
  Raw8 raw[kRowChunks];
#pragma unroll
  for (int i = 0; i < kRowChunks; ++i) {
    const int q = rs.lane + i * lanes;
    if (q < nch) load_raw8(b, bb + int64_t(q) * kVec, tb, raw[i]);
  }
#pragma unroll
  for (int i = 0; i < kRowChunks; ++i) {
    const int q = rs.lane + i * lanes;
    if (q < nch) {
      float v[kVec];
      unpack8(raw[i], tb, v);
#pragma unroll
      for (int k = 0; k < kVec; ++k) v[k] = 1.f / (1.f + expf(-v[k]));
      store8(beta, ob + int64_t(q) * kVec, tbeta, v);
    }
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
