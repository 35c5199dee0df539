// src/cuda/linear/gemv.cuh: the small-M projection y[m, n] (=|+=) sum_k x[m, k] W[n, k], M <= 16 (decode).
//
// Memory-bound: the kernel streams every weight byte from HBM exactly once, converting in registers
// (bf16/f16 -> f32, MXFP4 codes * E8M0 scale -> f32: the CPU decoder's values), and multiplies each
// weight by all M rows of x (f32, read through L1/L2: x is small). fp32 accumulation.
//
// Grid: one CTA of 256 threads per NR consecutive weight rows (rows past n are clamped for loads and never
// written). The K dimension is split over the CTA's threads in chunks (8 dense weights = 16 or 32 bytes,
// or 16 MXFP4 codes = 8 bytes + their scale byte); each thread keeps acc[NR][MT] (MT >= m, a power of two);
// the CTA reduces them (warp shuffles, then shared memory) and NR*MT threads write y.
// Alignment: the vector path needs 16-byte aligned dense weight rows (8-byte for MXFP4 packed rows) and
// 16-byte aligned f32 x rows (ldx % 4 == 0); `vec` = 0 runs the same math with scalar loads.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/elementwise.cuh"
#include "cuda/linear/mxfp4.cuh"

namespace kimi::cuda {

constexpr int kGemvThreads = 256;

struct GemvArgs {
  const float* x;  // [m, k] f32, rows ldx apart
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

template <int MT, int NR, class WF>
__global__ void __launch_bounds__(kGemvThreads) gemv_kernel(GemvArgs a) {
  const int64_t n0 = int64_t(blockIdx.x) * NR;
  int64_t rows[NR];
#pragma unroll
  for (int r = 0; r < NR; ++r) rows[r] = min(n0 + r, a.n - 1);  // clamped: loads stay in bounds
  float acc[NR][MT];
#pragma unroll
  for (int r = 0; r < NR; ++r)
#pragma unroll
    for (int i = 0; i < MT; ++i) acc[r][i] = 0.f;

  constexpr int C = WF::kChunk;
  const int64_t kv = a.vec ? (a.k / C) * C : 0;  // columns covered by whole chunks
  for (int64_t c = int64_t(threadIdx.x) * C; c < kv; c += int64_t(kGemvThreads) * C) {
    typename WF::Raw raw[NR];
#pragma unroll
    for (int r = 0; r < NR; ++r) WF::load(a, rows[r], c, raw[r]);  // issue every row's load first
#pragma unroll
    for (int part = 0; part < C / 8; ++part) {
      float wv[NR][8];
#pragma unroll
      for (int r = 0; r < NR; ++r) WF::decode(raw[r], part, wv[r]);
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        if (i >= a.m) break;
        const float4* xp = reinterpret_cast<const float4*>(a.x + i * a.ldx + c + part * 8);
        const float4 x0 = xp[0], x1 = xp[1];
        const float xv[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
        for (int r = 0; r < NR; ++r)
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[r][i] = fmaf(wv[r][j], xv[j], acc[r][i]);
      }
    }
  }
  for (int64_t c = kv + threadIdx.x; c < a.k; c += kGemvThreads) {  // tail / unaligned: scalar
    float wv[NR];
#pragma unroll
    for (int r = 0; r < NR; ++r) wv[r] = WF::scalar(a, rows[r], c);
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      if (i >= a.m) break;
      const float xv = a.x[i * a.ldx + c];
#pragma unroll
      for (int r = 0; r < NR; ++r) acc[r][i] = fmaf(wv[r], xv, acc[r][i]);
    }
  }

  // CTA reduction: warps first, then the 8 warp sums through shared memory.
  __shared__ float red[kGemvThreads / 32][NR * MT];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int r = 0; r < NR; ++r)
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      float v = acc[r][i];
#pragma unroll
      for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
      if (lane == 0) red[warp][r * MT + i] = v;
    }
  __syncthreads();
  for (int t = threadIdx.x; t < NR * MT; t += kGemvThreads) {
    const int r = t / MT, i = t % MT;
    if (i >= a.m || n0 + r >= a.n) continue;
    float s = 0.f;
#pragma unroll
    for (int wi = 0; wi < kGemvThreads / 32; ++wi) s += red[wi][t];
    const int64_t off = int64_t(i) * a.ldy + n0 + r;
    store_f32(a.y, off, a.ty, a.beta != 0.f ? load_f32(a.y, off, a.ty) + s : s);
  }
}

}  // namespace kimi::cuda
