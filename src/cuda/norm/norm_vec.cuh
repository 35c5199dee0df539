// src/cuda/norm/norm_vec.cuh: the norms (SPEC 3) on the vectorized row launch (cuda/norm/row_vec.cuh): a group of
// `lanes` threads per row, 8-element chunks in 16-byte accesses, the row's inputs held in registers between the
// sum of squares and the output (one read of each input, one write of each output):
//   rms_norm:       y = w * round_x(x * rsqrt(mean(x^2) + eps))
//   add_rms_norm:   sum = round_sum(x + r);  y = w * round_sum(sum * rsqrt(mean(sum^2) + eps))
//   gated_rms_norm: y = o * rsqrt(mean(o^2) + eps) * w * sigmoid(z)     (cuda/norm/gated_rms.cuh; fp32 throughout)
//   l2_norm:        y = x * (1 / sqrt(sum(x^2) + eps))
// The same element math as the one-warp-per-row kernels (rms_norm.cuh, add_rms_norm.cuh, gated_rms_norm.cuh,
// l2_norm.cuh); only the summation order of the statistic differs (fp32, fixed: row_vec.cuh).
// Views: rows at element offsets (RowMap), D contiguous, all vec8_view; dtypes as codes; w [D] 16-byte aligned.
// Loads in flight: each thread issues all of its chunks' 16-byte loads (raw, cuda/elementwise_vec.cuh Raw8) before
// it unpacks any, so a thread has kRowChunks (x2 with two inputs) accesses outstanding, not one; the weights of the
// output pass (a [D] vector, L1 / L2 hits) are loaded chunk by chunk, which keeps the registers (and occupancy) of
// the load pass. Bytes in flight per SM at 8192 rows (ptxas registers): rms_norm (64) and l2_norm (58), D = 4096 or
// D = 128 (4 lanes x 4 chunks): 1024 threads x 64 bytes = 64 KB; add_rms_norm (90, x and r, 128-thread blocks):
// 640 x 128 bytes = 80 KB; gated_rms_norm (94, o and z, 256-thread blocks at D = 128): 512 x 128 bytes = 64 KB. All
// above the ~26 KB per SM that 4.3 TB/s x ~0.8 us of latency asks for (Little's law, 132 SMs).
// NOTE: add_rms_norm's sum may alias x or r (exactly): each thread reads its chunks of x and r before it writes
//   the same chunks of sum, and keeps the rounded sum in registers for the second pass.
#pragma once

#include "cuda/elementwise.cuh"
#include "cuda/elementwise_vec.cuh"
#include "cuda/norm/gated_rms.cuh"
#include "cuda/norm/row_vec.cuh"
#include "cuda/rows.cuh"
#include "cuda/pdl.cuh"

namespace kimi::cuda {

// The chunks of this thread's row that exist: chunk q = lane + i * lanes, i < kRowChunks.
__device__ __forceinline__ bool row_chunk(const RowSlot& rs, int i, int lanes, int nch, int& q) {
  q = rs.lane + i * lanes;
  return rs.active && q < nch;
}

// Raw loads of this thread's chunks of a row at element offset `base` (all issued before any is used).
__device__ __forceinline__ void load_row_raw(const void* p, int64_t base, int t, const RowSlot& rs, int lanes, int nch,
                                             Raw8 (&raw)[kRowChunks]) {
#pragma unroll
  for (int i = 0; i < kRowChunks; ++i) {
    int q;
    if (row_chunk(rs, i, lanes, nch, q)) load_raw8(p, base + int64_t(q) * kVec, t, raw[i]);
  }
}

__global__ void __launch_bounds__(kRowMaxLanes) rms_norm_vec_kernel(const void* x, int tx, RowMap x_off, const void* w, int tw, void* y, int ty,
                                    RowMap y_off, int64_t rows, int d, float eps, int lanes) {
  pdl_launch_dependents();  // pdl.cuh: launched with programmatic_launch (norm.cu)
  pdl_wait();
  __shared__ float red[kRowMaxLanes / 32];
  const RowSlot rs = row_slot(lanes, rows);
  const int nch = d / kVec;
  const int64_t xb = rs.active ? row_offset(x_off, rs.row) : 0;
  Raw8 raw[kRowChunks];
  load_row_raw(x, xb, tx, rs, lanes, nch, raw);
  float v[kRowChunks][kVec];
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < kRowChunks; ++i) {
    int q;
    if (row_chunk(rs, i, lanes, nch, q)) {
      unpack8(raw[i], tx, v[i]);
#pragma unroll
      for (int k = 0; k < kVec; ++k) ss += v[i][k] * v[i][k];
    }
  }
  const float s = rsqrtf(row_sum(ss, lanes, red) / float(d) + eps);
  if (!rs.active) return;
  const int64_t yb = row_offset(y_off, rs.row);
#pragma unroll
  for (int i = 0; i < kRowChunks; ++i) {
    int q;
    if (row_chunk(rs, i, lanes, nch, q)) {
      float wv[kVec], o[kVec];
      load8(w, int64_t(q) * kVec, tw, wv);
#pragma unroll
      for (int k = 0; k < kVec; ++k) o[k] = wv[k] * round_to(v[i][k] * s, tx);  // NOTE: x's dtype first (HF)
      store8(y, yb + int64_t(q) * kVec, ty, o);
    }
  }
}

__global__ void __launch_bounds__(kRowMaxLanes) add_rms_norm_vec_kernel(const void* x, int tx, RowMap x_off, const void* r, int tr, RowMap r_off,
                                        const void* w, int tw, void* sum, int ts, RowMap s_off, void* y, int ty,
                                        RowMap y_off, int64_t rows, int d, float eps, int lanes) {
  __shared__ float red[kRowMaxLanes / 32];
  const RowSlot rs = row_slot(lanes, rows);
  const int nch = d / kVec;
  const int64_t xb = rs.active ? row_offset(x_off, rs.row) : 0, rb = rs.active ? row_offset(r_off, rs.row) : 0;
  const int64_t sb = rs.active ? row_offset(s_off, rs.row) : 0;
  Raw8 raw_x[kRowChunks], raw_r[kRowChunks];
  load_row_raw(x, xb, tx, rs, lanes, nch, raw_x);
  load_row_raw(r, rb, tr, rs, lanes, nch, raw_r);
  float v[kRowChunks][kVec];
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < kRowChunks; ++i) {
    int q;
    if (row_chunk(rs, i, lanes, nch, q)) {
      float rv[kVec];
      unpack8(raw_x[i], tx, v[i]);
      unpack8(raw_r[i], tr, rv);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        v[i][k] = round_to(v[i][k] + rv[k], ts);
        ss += v[i][k] * v[i][k];
      }
      store8(sum, sb + int64_t(q) * kVec, ts, v[i]);
    }
  }
  const float s = rsqrtf(row_sum(ss, lanes, red) / float(d) + eps);
  if (!rs.active) return;
  const int64_t yb = row_offset(y_off, rs.row);
#pragma unroll
  for (int i = 0; i < kRowChunks; ++i) {
    int q;
    if (row_chunk(rs, i, lanes, nch, q)) {
      float wv[kVec], o[kVec];
      load8(w, int64_t(q) * kVec, tw, wv);
#pragma unroll
      for (int k = 0; k < kVec; ++k) o[k] = wv[k] * round_to(v[i][k] * s, ts);
      store8(y, yb + int64_t(q) * kVec, ty, o);
    }
  }
}

// z is loaded with o, before the row sum, so both streams are in flight together.
__global__ void __launch_bounds__(kRowMaxLanes) gated_rms_norm_vec_kernel(const void* o, int to, RowMap o_off, const void* z, int tz, RowMap z_off,
                                          const void* w, int tw, void* y, int ty, RowMap y_off, int64_t rows, int d,
                                          float eps, int lanes) {
  __shared__ float red[kRowMaxLanes / 32];
  const RowSlot rs = row_slot(lanes, rows);
  const int nch = d / kVec;
  const bool has_z = z != nullptr;
  const int64_t ob = rs.active ? row_offset(o_off, rs.row) : 0, zb = rs.active && has_z ? row_offset(z_off, rs.row) : 0;
  Raw8 raw_o[kRowChunks], raw_z[kRowChunks];
  load_row_raw(o, ob, to, rs, lanes, nch, raw_o);
  if (has_z) load_row_raw(z, zb, tz, rs, lanes, nch, raw_z);
  float v[kRowChunks][kVec];
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < kRowChunks; ++i) {
    int q;
    if (row_chunk(rs, i, lanes, nch, q)) {
      unpack8(raw_o[i], to, v[i]);
#pragma unroll
      for (int k = 0; k < kVec; ++k) ss += v[i][k] * v[i][k];
    }
  }
  const float r = gated_rms_scale(row_sum(ss, lanes, red), d, eps);
  if (!rs.active) return;
  const int64_t yb = row_offset(y_off, rs.row);
#pragma unroll
  for (int i = 0; i < kRowChunks; ++i) {
    int q;
    if (row_chunk(rs, i, lanes, nch, q)) {
      float wv[kVec], g[kVec], out[kVec];
      load8(w, int64_t(q) * kVec, tw, wv);
      if (has_z) unpack8(raw_z[i], tz, g);
#pragma unroll
      for (int k = 0; k < kVec; ++k) out[k] = gated_rms_out(v[i][k], r, wv[k], has_z, has_z ? g[k] : 0.f);
      store8(y, yb + int64_t(q) * kVec, ty, out);
    }
  }
}

__global__ void __launch_bounds__(kRowMaxLanes) l2_norm_vec_kernel(const void* x, int tx, RowMap x_off, void* y, int ty, RowMap y_off, int64_t rows,
                                   int d, float eps, int lanes) {
  __shared__ float red[kRowMaxLanes / 32];
  const RowSlot rs = row_slot(lanes, rows);
  const int nch = d / kVec;
  const int64_t xb = rs.active ? row_offset(x_off, rs.row) : 0;
  Raw8 raw[kRowChunks];
  load_row_raw(x, xb, tx, rs, lanes, nch, raw);
  float v[kRowChunks][kVec];
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < kRowChunks; ++i) {
    int q;
    if (row_chunk(rs, i, lanes, nch, q)) {
      unpack8(raw[i], tx, v[i]);
#pragma unroll
      for (int k = 0; k < kVec; ++k) ss += v[i][k] * v[i][k];
    }
  }
  const float s = 1.f / sqrtf(row_sum(ss, lanes, red) + eps);  // NOTE: not rsqrtf (approximate, ~2 ulp)
  if (!rs.active) return;
  const int64_t yb = row_offset(y_off, rs.row);
#pragma unroll
  for (int i = 0; i < kRowChunks; ++i) {
    int q;
    if (row_chunk(rs, i, lanes, nch, q)) {
      float out[kVec];
#pragma unroll
      for (int k = 0; k < kVec; ++k) out[k] = v[i][k] * s;
      store8(y, yb + int64_t(q) * kVec, ty, out);
    }
  }
}

}  // namespace kimi::cuda
