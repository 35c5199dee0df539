// src/cuda/moe/grouped.cuh: the routed experts of one MoE layer over grouped rows (group.cuh), for few rows
// per expert (decode: 1-16), as ONE launch for gate+up with the GLU fused and ONE launch for down:
//   gate/up (P = 2): h[r, n] = glu(sum_c x[src(r), c] W1_e[n, c], sum_c x[src(r), c] W3_e[n, c])   (glu.cuh)
//   down    (P = 1): y[r, n] = sum_c h[r, c] W2_e[n, c]
// for every grouped row r of expert e (offsets[e] <= r < offsets[e + 1]); src(r) = token_of_row[r] for gate/up
// (x is the token-major activation), r itself for down (h is already grouped). x, h, y are f32; fp32 accumulation;
// the weights are dense (f32/bf16/f16) or MXFP4, decoded in registers by gemv.cuh's DenseW / Mxfp4W (the CPU
// decoder's values), and streamed once per row group: bandwidth-bound on the bytes of the touched experts.
//
// Grid: (ceil(n / NR), E). Block (tile, e) owns NR output columns of each of the P projections of expert e; a
// block whose expert has no rows exits at once (no host ever reads the counts). It walks its expert's rows in
// groups of MT (looping when the expert has more: the group's weight tile is then re-read, from L2), with each
// thread holding acc[P * NR][MT] over its K chunks, then a warp-shuffle + shared-memory reduction as gemv.cuh.
// Each row's sum is computed the same way whatever its position in the group, so the results do not depend
// on the (atomic) order of rows within an expert: replays are bit-identical.
//
// Expert weights: ExpertProj (expert_tile.cuh, with the weight-stream steps this kernel shares with touched.cuh) gives
// expert e's pointers from a base and a byte stride (stacked experts) or from a device table (separately
// allocated experts, uploaded per call). Both read the same bytes: the same results (given the same `vec`, below).
// Alignment: `vec` (checked by the launcher over every expert) selects 16-byte (dense) / 8-byte (MXFP4) weight
// loads and float4 x loads; `vec` = 0 runs the same math with scalar loads.
#pragma once

#include <cstdint>

#include "cuda/linear/gemv.cuh"
#include "cuda/moe/expert_tile.cuh"
#include "cuda/moe/glu.cuh"

namespace kimi::cuda {

constexpr int kGroupedThreads = 128;

struct GroupedArgs {
  const int32_t* offsets;  // [E + 1]
  const int32_t* src_row;  // [rows]: the x row of grouped row r; null: r itself
  const float* x;          // f32, rows ldx apart
  int64_t ldx;
  ExpertProj proj[2];  // gate, up (P = 2) or down (proj[0])
  int64_t n, k;        // output columns per projection, input width
  float* y;            // f32 [rows, n] in grouped order, rows ldy apart
  int64_t ldy;
  int situ;
  float beta, lbeta;
  int vec;
};

template <int MT, int NR, int P, class WF>
__global__ void __launch_bounds__(kGroupedThreads) grouped_kernel(GroupedArgs a) {
  constexpr int R = P * NR;  // weight rows of the block: NR of each projection
  constexpr int kWarps = kGroupedThreads / 32;
  const int e = int(blockIdx.y);
  const int32_t r_begin = a.offsets[e], r_end = a.offsets[e + 1];
  if (r_begin == r_end) return;
  const int64_t n0 = int64_t(blockIdx.x) * NR;
  int64_t rows[NR];
#pragma unroll
  for (int r = 0; r < NR; ++r) rows[r] = min(n0 + r, a.n - 1);  // clamped: loads stay in bounds
  GemvArgs wa[P];
#pragma unroll
  for (int p = 0; p < P; ++p) set_weight_args(wa[p], expert_ptr(a.proj[p], e));
  constexpr int C = WF::kChunk;
  const int64_t kv = a.vec ? (a.k / C) * C : 0;  // columns covered by whole chunks
  __shared__ float red[kWarps][R * MT];
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;

  for (int32_t g0 = r_begin; g0 < r_end; g0 += MT) {
    const int m = min(MT, int(r_end - g0));  // rows in this group (block-uniform)
    const float* xr[MT];
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      const int32_t r = g0 + min(i, m - 1);
      xr[i] = a.x + int64_t(a.src_row ? a.src_row[r] : r) * a.ldx;
    }
    float acc[R][MT];
#pragma unroll
    for (int j = 0; j < R; ++j)
#pragma unroll
      for (int i = 0; i < MT; ++i) acc[j][i] = 0.f;

    for (int64_t c = int64_t(threadIdx.x) * C; c < kv; c += int64_t(kGroupedThreads) * C) {
      typename WF::Raw raw[R];
      load_chunk<P, NR, WF>(wa, rows, c, raw);  // every row's load first
#pragma unroll
      for (int part = 0; part < C / 8; ++part) {
        float wv[R][8];
#pragma unroll
        for (int j = 0; j < R; ++j) WF::decode(raw[j], part, wv[j]);
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          if (i >= m) break;
          const float4* xp = reinterpret_cast<const float4*>(xr[i] + c + part * 8);
          const float4 x0 = xp[0], x1 = xp[1];
          const float xv[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
          for (int j = 0; j < R; ++j)
#pragma unroll
            for (int q = 0; q < 8; ++q) acc[j][i] = fmaf(wv[j][q], xv[q], acc[j][i]);
        }
      }
    }
    for (int64_t c = kv + threadIdx.x; c < a.k; c += kGroupedThreads) {  // tail / unaligned: scalar
      float wv[R];
      tail_weights<P, NR, WF>(wa, rows, c, wv);
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        if (i >= m) break;
        const float xv = xr[i][c];
#pragma unroll
        for (int j = 0; j < R; ++j) acc[j][i] = fmaf(wv[j], xv, acc[j][i]);
      }
    }

    // Block reduction: warps first, then the warp sums through shared memory.
    warp_sums(acc, m, lane, red[warp]);
    __syncthreads();
    for (int t = int(threadIdx.x); t < NR * MT; t += kGroupedThreads) {
      const int r = t / MT, i = t % MT;
      if (i >= m || n0 + r >= a.n) continue;
      float s[P];
#pragma unroll
      for (int p = 0; p < P; ++p) {
        s[p] = 0.f;
#pragma unroll
        for (int wi = 0; wi < kWarps; ++wi) s[p] += red[wi][(p * NR + r) * MT + i];
      }
      float v = s[0];
      if constexpr (P == 2) v = glu_value(s[0], s[1], a.situ, a.beta, a.lbeta);
      a.y[int64_t(g0 + i) * a.ldy + n0 + r] = v;
    }
    __syncthreads();  // red is reused by the next row group
  }
}

}  // namespace kimi::cuda
