// src/cuda/moe/group.cuh: grouping the routed (token, slot) pairs by expert on the device, and combining
// the expert outputs. A slot is i = t * K + j (token t's j-th routed expert ids[i]); rows of the grouped
// buffers are ordered by expert (expert e owns rows [offsets[e], offsets[e + 1])); within an expert the
// order is whatever the atomics gave (each row is computed independently of its position, and the combine
// reads rows by slot, so the result does not depend on it, bit for bit).
//   group_kernel:   the touched path's grouping in ONE launch of ONE block (E <= kGroupMaxExperts, experts.h:
//                   counts in shared memory): count, exclusive scan into offsets [E + 1], the touched experts in
//                   ascending order active[0 .. n_active) (the grid of touched.cuh: no blocks for untouched
//                   experts), place; also the optional ids / weights copies (the caller's [T, K] outputs) and the
//                   optional z = f32(x) [T, d] (the expert input without a latent: one launch fewer than a convert).
//                   group_kernel<true> first routes the tokens itself (router_rank.cuh: E <= 256, K <= 32, all
//                   warps ranking the keys at once; the router launch's ids and weights bit for bit, one launch
//                   fewer) and counts the picks as it makes them. Indices are 32-bit (slots < 2^31: latent_moe).
//   count_kernel:   count[ids[i]] += 1                                  (count zeroed first)
//   offsets_kernel: offsets[e] = sum_{e' < e} count[e'], offsets[E] = T*K; cursor = offsets[0..E)
//                   (ONE block: a chunked scan over E, any E)
//   place_kernel:   row = cursor[ids[i]]++; row_of_slot[i] = row; token_of_row[row] = i / K
//   combine_kernel: y[t, c] = sum_j w[t*K + j] * ye[row_of_slot[t*K + j], c]  (j ascending, fp32; ye f32;
//                   combine_bf16_kernel: the same on bf16 ye, 8 columns per thread)
//                   (+ shared[t, c], the shared expert's f32 output), then (beta 1) y's old value + that sum in f32
//                   (the residual add), stored as y's dtype
// Nothing here reads a count on the host: the expert kernels (touched.cuh, grouped.cuh, grouped_gemm.cuh) take
// offsets (and the active list) on the device.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "cuda/elementwise.cuh"
#include "cuda/moe/experts.h"
#include "cuda/moe/router_rank.cuh"
#include "cuda/pdl.cuh"

namespace kimi::cuda {

constexpr int kOffsetsThreads = 256;

__global__ void count_kernel(const int32_t* __restrict__ ids, int64_t slots, int32_t* __restrict__ count) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < slots) atomicAdd(&count[ids[i]], 1);
}

// Exclusive scan of count [E] into offsets [E + 1] and cursor [E]; launch with ONE block of kOffsetsThreads.
// Each pass scans kOffsetsThreads counts (warp shuffles, then the warp totals) on top of the running carry.
__global__ void __launch_bounds__(kOffsetsThreads) offsets_kernel(const int32_t* __restrict__ count, int e_count,
                                                                  int32_t* __restrict__ offsets,
                                                                  int32_t* __restrict__ cursor) {
  constexpr int kWarps = kOffsetsThreads / 32;
  __shared__ int32_t warp_sum[kWarps];
  __shared__ int32_t carry;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (threadIdx.x == 0) carry = 0;
  __syncthreads();
  for (int base = 0; base < e_count; base += kOffsetsThreads) {
    const int e = base + int(threadIdx.x);
    const int32_t v = e < e_count ? count[e] : 0;
    int32_t s = v;  // inclusive scan within the warp
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
      const int32_t u = __shfl_up_sync(0xffffffffu, s, o);
      if (lane >= o) s += u;
    }
    if (lane == 31) warp_sum[warp] = s;
    __syncthreads();
    if (warp == 0) {  // inclusive scan of the warp totals
      int32_t w = lane < kWarps ? warp_sum[lane] : 0;
#pragma unroll
      for (int o = 1; o < 32; o *= 2) {
        const int32_t u = __shfl_up_sync(0xffffffffu, w, o);
        if (lane >= o) w += u;
      }
      if (lane < kWarps) warp_sum[lane] = w;
    }
    __syncthreads();
    const int32_t excl = carry + (warp ? warp_sum[warp - 1] : 0) + s - v;
    if (e < e_count) offsets[e] = excl, cursor[e] = excl;
    __syncthreads();  // every thread has read carry and warp_sum
    if (threadIdx.x == kOffsetsThreads - 1) carry = excl + v;
    __syncthreads();
  }
  if (threadIdx.x == 0) offsets[e_count] = carry;
}

constexpr int kGroupThreads = kRankThreads;
// group_kernel's E int32 counts (dynamic, E <= kGroupMaxExperts) plus its 264 static bytes fit the default 48 KB
// of shared memory; the routing variant adds its RankSmem (E <= kRankMaxExperts).
static_assert(kGroupMaxExperts * 4 + 264 <= 48 * 1024);
static_assert(sizeof(RankSmem) + kRankMaxExperts * 4 + 264 <= 48 * 1024);

struct GroupArgs {
  const int32_t* ids;  // [T*K] routed experts, slot order (group_kernel<true>: written first by route)
  const float* w;      // [T*K] routing weights (read only for the weights copy)
  RouterArgs route;    // group_kernel<true>: logits -> ids, w (route.ids == ids, route.w == w, rows K apart)
  int32_t slots;       // T*K
  int k, e_count;
  int32_t* offsets;       // [E + 1]
  int32_t* row_of_slot;   // [T*K]
  int32_t* token_of_row;  // [T*K]
  int32_t* active;        // [min(E, T*K)]: touched experts ascending; entries from n_active on are left as they were
  int32_t* n_active;      // [1]
  int32_t* ids_out;       // optional [T, K] copies, rows ldi / ldw apart
  int64_t ldi;
  float* w_out;
  int64_t ldw;
  const void* x;  // optional [T, d] of dtype code tx, rows ldx apart: z [T, d] f32 contiguous = f32(x) (exact)
  int tx;
  int64_t ldx;
  int32_t x_rows, x_cols;
  float* z;
};

// Dynamic shared memory of group_kernel<kRoute> for e_count experts.
constexpr size_t group_smem_bytes(bool route, int64_t e_count) {
  return (route ? sizeof(RankSmem) : 0) + size_t(e_count) * 4;
}

// z elements whose loads a thread issues before the routing (stored after it: the loads overlap the routing).
constexpr int kGroupZHeld = 4;

// z[i] for i = base + threadIdx.x + m kGroupThreads, m < kGroupZHeld (i < x_rows x_cols): load, then store.
__device__ __forceinline__ void group_z_load(const GroupArgs& a, int base, float (&v)[kGroupZHeld]) {
#pragma unroll
  for (int m = 0; m < kGroupZHeld; ++m) {
    const int i = base + int(threadIdx.x) + m * kGroupThreads, r = i / a.x_cols;
    if (r < a.x_rows) v[m] = load_f32(a.x, int64_t(r) * a.ldx + (i - r * a.x_cols), a.tx);
  }
}
__device__ __forceinline__ void group_z_store(const GroupArgs& a, int base, const float (&v)[kGroupZHeld]) {
#pragma unroll
  for (int m = 0; m < kGroupZHeld; ++m) {
    const int i = base + int(threadIdx.x) + m * kGroupThreads;
    if (i < a.x_rows * a.x_cols) a.z[i] = v[m];
  }
}

// Launch with ONE block of kGroupThreads and group_smem_bytes(kRoute, e_count) of dynamic shared memory. The scan
// carries (touched, count) packed in one int64 (touched experts in the high word, rows in the low word: both
// < 2^31), so the offsets and the active list come out of one pass. kRoute: route the tokens first
// (router_rank.cuh: E <= kRankMaxExperts, K <= kRankMaxK), counting the picks as they are made.
template <bool kRoute>
__global__ void __launch_bounds__(kGroupThreads) group_kernel(GroupArgs a) {
  pdl_launch_dependents();  // pdl.cuh: launched with programmatic_launch
  pdl_wait();
  extern __shared__ __align__(16) unsigned char group_smem[];
  int32_t* cnt = reinterpret_cast<int32_t*>(group_smem + (kRoute ? sizeof(RankSmem) : 0));  // [E]: counts, cursors
  constexpr int kWarps = kGroupThreads / 32;
  __shared__ int64_t warp_sum[kWarps];
  __shared__ int64_t carry;
  const int tid = int(threadIdx.x), lane = tid % 32, warp = tid / 32;
  float zv[kGroupZHeld] = {};
  if (a.z) group_z_load(a, 0, zv);
  for (int e = tid; e < a.e_count; e += kGroupThreads) cnt[e] = 0;
  if (tid == 0) carry = 0;
  __syncthreads();
  if constexpr (kRoute) {  // ends with a barrier: the counts and the ids / w writes are visible to the block
    route_rank(
        a.route, *reinterpret_cast<RankSmem*>(group_smem),
        [&](int64_t t, int j, int32_t e) {
          atomicAdd(&cnt[e], 1);
          if (a.ids_out) a.ids_out[t * a.ldi + j] = e;
        },
        [&](int64_t t, int j, float w) {
          if (a.w_out) a.w_out[t * a.ldw + j] = w;
        });
  } else {
    for (int i = tid; i < a.slots; i += kGroupThreads) {
      const int32_t id = a.ids[i];
      atomicAdd(&cnt[id], 1);
      const int t = i / a.k, j = i - t * a.k;
      if (a.ids_out) a.ids_out[t * a.ldi + j] = id;
      if (a.w_out) a.w_out[t * a.ldw + j] = a.w[i];
    }
    __syncthreads();
  }
  if (a.z) group_z_store(a, 0, zv);
  for (int base = 0; base < a.e_count; base += kGroupThreads) {
    const int e = base + tid;
    const int32_t c = e < a.e_count ? cnt[e] : 0;
    const int64_t v = (int64_t(c > 0) << 32) | int64_t(c);
    int64_t s = v;  // inclusive scan within the warp
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
      const int64_t u = __shfl_up_sync(0xffffffffu, s, o);
      if (lane >= o) s += u;
    }
    if (lane == 31) warp_sum[warp] = s;
    __syncthreads();
    if (warp == 0) {  // inclusive scan of the warp totals (kWarps == 32)
      int64_t t = warp_sum[lane];
#pragma unroll
      for (int o = 1; o < 32; o *= 2) {
        const int64_t u = __shfl_up_sync(0xffffffffu, t, o);
        if (lane >= o) t += u;
      }
      warp_sum[lane] = t;
    }
    __syncthreads();
    const int64_t excl = carry + (warp ? warp_sum[warp - 1] : 0) + s - v;
    if (e < a.e_count) {
      a.offsets[e] = int32_t(excl & 0xffffffff);
      cnt[e] = int32_t(excl & 0xffffffff);  // this thread's own entry: the cursor
      if (c > 0) a.active[excl >> 32] = e;
    }
    __syncthreads();  // every thread has read carry and warp_sum
    if (tid == kGroupThreads - 1) carry = excl + v;
    __syncthreads();
  }
  if (tid == 0) {
    a.offsets[a.e_count] = int32_t(carry & 0xffffffff);
    *a.n_active = int32_t(carry >> 32);
  }
  for (int i = tid; i < a.slots; i += kGroupThreads) {
    const int32_t row = atomicAdd(&cnt[a.ids[i]], 1);
    a.row_of_slot[i] = row;
    a.token_of_row[row] = i / a.k;
  }
  if (a.z)  // T <= touched_max_tokens rows of d: a few elements per thread, L2-resident
    for (int base = kGroupZHeld * kGroupThreads; base < a.x_rows * a.x_cols; base += kGroupZHeld * kGroupThreads) {
      group_z_load(a, base, zv);
      group_z_store(a, base, zv);
    }
}

__global__ void place_kernel(const int32_t* __restrict__ ids, int64_t slots, int k, int32_t* __restrict__ cursor,
                             int32_t* __restrict__ row_of_slot, int32_t* __restrict__ token_of_row) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= slots) return;
  const int32_t row = atomicAdd(&cursor[ids[i]], 1);
  row_of_slot[i] = row;
  token_of_row[row] = int32_t(i / k);
}

// ye [T*K, d] f32 in grouped order; shared, when not null, [T, d] f32 rows d apart (the shared expert's output,
// weight 1: the touched path's fused rows ye + T*K * d, or cuda::mlp's output) is added after the routed sum; y is
// written as dtype code ty (f32 scratch, or the operator's out: the one rounding), rows ldy apart; beta 1 adds y's
// old value first (y is then not read by anything else in the launch). One thread per output element.
__global__ void combine_kernel(const float* __restrict__ ye, const int32_t* __restrict__ row_of_slot,
                               const float* __restrict__ w, int k, int64_t tokens, int64_t d,
                               const float* __restrict__ shared, void* __restrict__ y, int ty, int64_t ldy,
                               float beta) {
  pdl_launch_dependents();  // pdl.cuh: launched with programmatic_launch
  pdl_wait();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= tokens * d) return;
  const int64_t t = i / d, c = i % d;
  float acc = 0.f;
  for (int j = 0; j < k; ++j) acc += w[t * k + j] * ye[int64_t(row_of_slot[t * k + j]) * d + c];
  if (shared) acc += shared[t * d + c];
  if (beta != 0.f) acc = load_f32(y, t * ldy + c, ty) + acc;
  store_f32(y, t * ldy + c, ty, acc);
}

constexpr int kCombineCols = 8;  // combine_bf16_kernel: output columns per thread (one 16-byte ye load per row)

// combine_kernel's math on bf16 ye (the tensor-core path), kCombineCols columns per thread: d % 8 == 0 (the
// tensor-core path's widths) and ye's base 16-byte aligned, so each (t, j) is ONE 16-byte load of 8 bf16, and the
// index math runs once per 8 outputs. Each element's products and sums in fp32 in combine_kernel's order.
__global__ void combine_bf16_kernel(const __nv_bfloat16* __restrict__ ye, const int32_t* __restrict__ row_of_slot,
                                    const float* __restrict__ w, int k, int64_t tokens, int64_t d,
                                    const float* __restrict__ shared, void* __restrict__ y, int ty, int64_t ldy,
                                    float beta) {
  pdl_launch_dependents();  // pdl.cuh: launched with programmatic_launch
  pdl_wait();
  const int64_t groups = d / kCombineCols;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= tokens * groups) return;
  const int64_t t = i / groups, c0 = (i % groups) * kCombineCols;
  float acc[kCombineCols];
#pragma unroll
  for (int q = 0; q < kCombineCols; ++q) acc[q] = 0.f;
  for (int j = 0; j < k; ++j) {
    const float wj = w[t * k + j];
    const uint4 raw = *reinterpret_cast<const uint4*>(ye + int64_t(row_of_slot[t * k + j]) * d + c0);
    const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int q = 0; q < kCombineCols / 2; ++q) {
      const float2 f = __bfloat1622float2(pairs[q]);
      acc[2 * q] += wj * f.x;
      acc[2 * q + 1] += wj * f.y;
    }
  }
#pragma unroll
  for (int q = 0; q < kCombineCols; ++q) {
    const int64_t c = c0 + q;
    float v = acc[q];
    if (shared) v += shared[t * d + c];
    if (beta != 0.f) v = load_f32(y, t * ldy + c, ty) + v;
    store_f32(y, t * ldy + c, ty, v);
  }
}

// 4-byte elements [rows, cols] contiguous -> rows ld apart (the optional ids / weights outputs).
__global__ void copy_rows_kernel(const uint32_t* __restrict__ src, int64_t rows, int64_t cols, uint32_t* __restrict__ dst,
                                 int64_t ld) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < rows * cols) dst[(i / cols) * ld + i % cols] = src[i];
}

}  // namespace kimi::cuda
