// src/cuda/linear/gemv.cuh: the small-M projection y[m, n] (=|+=) sum_k x[m, k] W[n, k], M <= 16 (decode), on
// FFMA; bf16 x with dense bf16 W (aligned, k % 8 == 0) takes the tensor-core gemv_mma.cuh instead.
//
// Memory-bound: the kernel streams every weight byte from HBM exactly once, converting in registers
// (bf16/f16 -> f32, MXFP4 codes * E8M0 scale -> f32: the CPU decoder's values), and multiplies each
// weight by all M rows of x (f32 or bf16, read through L1: x is small and every warp reads all of it). fp32
// accumulation.
//
// Grid: CTAs of kGemvWarps warps (one launch may run up to kGemvMaxJobs independent projections: GemvBatch); a
// group of ks warps (ks in {1, 2, 4}: GemvArgs::ks) owns NR consecutive weight rows (rows past n are clamped for
// loads and never written) and splits K: lane l of warp j takes chunks 32 j + l, + 32 ks, ... (a chunk = 8 dense
// weights = 16 or 32 bytes, or 16 MXFP4 codes = 8 bytes + their scale
// byte), U chunks per row in flight in a ring (consuming a chunk requests the one U rounds later), so a lane keeps
// about U * NR loads in flight at all times (the bandwidth comes from loads in flight, not from threads). Each lane keeps acc[NR][MT] (MT >= m, a
// power of two); a warp shuffle reduction, then (ks > 1) the group's warps summed through shared memory. ks > 1
// gives small-n weights (an expert's 1024 rows) enough warps to keep HBM busy; NR > 1 reuses each x load.
// Launched with programmatic_launch (pdl.cuh): the ring's first weight loads are issued before pdl_wait(), so a
// projection starts streaming its weights while the kernel before it finishes.
// Alignment: the vector path needs 16-byte aligned dense weight rows (8-byte for MXFP4 packed rows) and 16-byte
// aligned x rows; `vec` = 0 runs the same math with scalar loads.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/elementwise.cuh"
#include "cuda/linear/mxfp4.cuh"
#include "cuda/pdl.cuh"

namespace kimi::cuda {

constexpr int kGemvWarps = 4;
constexpr int kGemvThreads = 32 * kGemvWarps;

struct GemvArgs {
  const void* x;  // [m, k] f32 or bf16 (the kernel's XT), rows ldx apart
  int64_t ldx;
  int m;
  const void* w;  // dense [n, k] (ldw elements) or MXFP4 packed u8 [n, k/2] (ldw bytes)
  int64_t ldw;
  const uint8_t* scale;  // MXFP4 only: [n, k/32], rows lds apart
  int64_t lds;
  int64_t n, k;
  void* y;  // [m, n], dtype code ty, rows ldy apart
  int ty;
  int64_t ldy;
  float beta;
  int vec;  // 1: vector loads (alignment checked by the launcher)
  int ks;   // warps per row group splitting K: 1, 2 or 4
};

// Weight formats: kChunk weights per chunk; load() fetches one chunk's raw bits of one row, decode() turns
// 8 of them (part 0 or 1) into f32; scalar() is one weight (for tails and unaligned rows).
template <class T>
struct DenseW {
  static constexpr int kChunk = 8;
  using Raw = typename std::conditional<sizeof(T) == 4, uint4[2], uint4[1]>::type;
  static __device__ __forceinline__ void load(const GemvArgs& a, int64_t row, int64_t c, Raw& raw) {
    const uint4* p = reinterpret_cast<const uint4*>(static_cast<const T*>(a.w) + row * a.ldw + c);
    raw[0] = __ldcs(p);
    if constexpr (sizeof(T) == 4) raw[1] = __ldcs(p + 1);
  }
  static __device__ __forceinline__ void decode(const Raw& raw, int, float (&v)[8]) {
    if constexpr (sizeof(T) == 4) {
      const float* f0 = reinterpret_cast<const float*>(&raw[0]);
      const float* f1 = reinterpret_cast<const float*>(&raw[1]);
#pragma unroll
      for (int j = 0; j < 4; ++j) v[j] = f0[j], v[4 + j] = f1[j];
    } else {
      const T* h = reinterpret_cast<const T*>(&raw[0]);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = to_float(h[j]);
    }
  }
  static __device__ __forceinline__ float scalar(const GemvArgs& a, int64_t row, int64_t col) {
    return to_float(static_cast<const T*>(a.w)[row * a.ldw + col]);
  }
  static __device__ __forceinline__ float to_float(float v) { return v; }
  static __device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
  static __device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
};

struct Mxfp4W {
  static constexpr int kChunk = 16;
  struct Raw {
    uint2 codes;  // 16 codes, low nibble first
    float scale;
  };
  static __device__ __forceinline__ void load(const GemvArgs& a, int64_t row, int64_t c, Raw& raw) {
    const uint8_t* p = static_cast<const uint8_t*>(a.w) + row * a.ldw + c / 2;
    raw.codes = __ldcs(reinterpret_cast<const uint2*>(p));
    raw.scale = e8m0_value(a.scale[row * a.lds + c / 32]);
  }
  static __device__ __forceinline__ void decode(const Raw& raw, int part, float (&v)[8]) {
    const uint32_t word = part ? raw.codes.y : raw.codes.x;
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = e2m1_value((word >> (4 * j)) & 15u) * raw.scale;
  }
  static __device__ __forceinline__ float scalar(const GemvArgs& a, int64_t row, int64_t col) {
    const uint32_t byte = static_cast<const uint8_t*>(a.w)[row * a.ldw + col / 2];
    return e2m1_value((col & 1) ? byte >> 4 : byte & 15u) * e8m0_value(a.scale[row * a.lds + col / 32]);
  }
};

// x rows: 8 consecutive values of row i from column c (c a multiple of 8; 16-byte aligned for the vector path).
template <class XT>
__device__ __forceinline__ void load_x8(const GemvArgs& a, int i, int64_t c, float (&v)[8]) {
  if constexpr (std::is_same_v<XT, float>) {
    const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(a.x) + i * a.ldx + c);
    const float4 x0 = __ldg(p), x1 = __ldg(p + 1);
    v[0] = x0.x, v[1] = x0.y, v[2] = x0.z, v[3] = x0.w, v[4] = x1.x, v[5] = x1.y, v[6] = x1.z, v[7] = x1.w;
  } else {
    const uint4 raw = __ldg(reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(a.x) + i * a.ldx + c));
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 f = __bfloat1622float2(h[j]);
      v[2 * j] = f.x, v[2 * j + 1] = f.y;
    }
  }
}
template <class XT>
__device__ __forceinline__ float load_x1(const GemvArgs& a, int i, int64_t c) {
  if constexpr (std::is_same_v<XT, float>) return static_cast<const float*>(a.x)[i * a.ldx + c];
  else return __bfloat162float(static_cast<const __nv_bfloat16*>(a.x)[i * a.ldx + c]);
}

// Independent projections of one launch (linear_many): job j owns blocks [block_end[j - 1], block_end[j]) of the
// grid (block_end[-1] = 0), each job laid out over its blocks exactly as a launch of its own, so a job's results
// do not depend on the other jobs of the launch. Every job shares the kernel's template (M bound, weight format,
// x dtype); a single projection is a batch of one.
inline constexpr int kGemvMaxJobs = 8;
struct GemvBatch {
  GemvArgs job[kGemvMaxJobs];
  int64_t block_end[kGemvMaxJobs];
  int count;
};

// U: chunks per row in flight per lane.
template <int MT, int NR, int U, class WF, class XT>
__global__ void __launch_bounds__(kGemvThreads) gemv_kernel(const __grid_constant__ GemvBatch batch) {
  pdl_launch_dependents();  // the next kernel may start once every CTA of this one is running
  int j = 0;
  while (j + 1 < batch.count && int64_t(blockIdx.x) >= batch.block_end[j]) ++j;  // block-uniform
  const GemvArgs& a = batch.job[j];
  const int64_t block = int64_t(blockIdx.x) - (j ? batch.block_end[j - 1] : 0);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, ks = a.ks, part_k = warp % ks;
  const int64_t n0 = (block * (kGemvWarps / ks) + warp / ks) * NR;
  const bool live = n0 < a.n;  // a dead group still reaches the barrier below
  int64_t rows[NR];
#pragma unroll
  for (int r = 0; r < NR; ++r) rows[r] = min(n0 + r, a.n - 1);  // clamped: loads stay in bounds
  float acc[NR][MT];
#pragma unroll
  for (int r = 0; r < NR; ++r)
#pragma unroll
    for (int i = 0; i < MT; ++i) acc[r][i] = 0.f;

  constexpr int C = WF::kChunk;
  const int64_t kv = live && a.vec ? (a.k / C) * C : 0;  // columns covered by whole chunks
  const int64_t step = int64_t(32) * ks * C;            // between a lane's consecutive chunks
  // The ring: slot u holds the chunk this lane consumes u rounds ahead; consuming a slot refills it at once, so U
  // chunks per row stay in flight without a gap between rounds. The weights of the first U chunks are requested
  // before pdl_wait() (pdl.cuh).
  const int64_t c_first = (int64_t(part_k) * 32 + lane) * C;
  typename WF::Raw raw[U][NR];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t c = c_first + u * step;
    if (c < kv) {
#pragma unroll
      for (int r = 0; r < NR; ++r) WF::load(a, rows[r], c, raw[u][r]);
    }
  }
  pdl_wait();  // x (and y) come from earlier kernels
  for (int64_t c0 = c_first; c0 < kv; c0 += step * U) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + u * step;
      if (c >= kv) break;
#pragma unroll
      for (int part = 0; part < C / 8; ++part) {
        float wv[NR][8];
#pragma unroll
        for (int r = 0; r < NR; ++r) WF::decode(raw[u][r], part, wv[r]);
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          if (i >= a.m) break;
          float xv[8];
          load_x8<XT>(a, i, c + part * 8, xv);
#pragma unroll
          for (int r = 0; r < NR; ++r)
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[r][i] = fmaf(wv[r][j], xv[j], acc[r][i]);
        }
      }
      if (c + U * step < kv) {
#pragma unroll
        for (int r = 0; r < NR; ++r) WF::load(a, rows[r], c + U * step, raw[u][r]);
      }
    }
  }
  const int64_t k_end = live ? a.k : 0;
  for (int64_t c = kv + part_k * 32 + lane; c < k_end; c += 32 * ks) {  // tail / unaligned: scalar
    float wv[NR];
#pragma unroll
    for (int r = 0; r < NR; ++r) wv[r] = WF::scalar(a, rows[r], c);
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      if (i >= a.m) break;
      const float xv = load_x1<XT>(a, i, c);
#pragma unroll
      for (int r = 0; r < NR; ++r) acc[r][i] = fmaf(wv[r], xv, acc[r][i]);
    }
  }

  // Warp reduction (every lane ends with every sum), then across the group's warps through shared memory; output
  // t = r MT + i (row n0 + r, x row i) is written by lane t % 32 of the group's first warp.
  __shared__ float red[kGemvWarps][NR * MT];
#pragma unroll
  for (int r = 0; r < NR; ++r)
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      float v = acc[r][i];
#pragma unroll
      for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
      acc[r][i] = v;
      if (ks > 1 && lane == 0) red[warp][r * MT + i] = v;
    }
  if (ks > 1) __syncthreads();
  if (!live || part_k != 0) return;
#pragma unroll
  for (int r = 0; r < NR; ++r)
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      const int t = r * MT + i;
      if (i >= a.m || lane != t % 32 || n0 + r >= a.n) continue;
      float v = acc[r][i];
      for (int j = 1; j < ks; ++j) v += red[warp + j][t];
      const int64_t off = int64_t(i) * a.ldy + n0 + r;
      store_f32(a.y, off, a.ty, a.beta != 0.f ? load_f32(a.y, off, a.ty) + v : v);
    }
}

}  // namespace kimi::cuda
