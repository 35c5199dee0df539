// src/cuda/moe/grouped.cuh: the routed experts of one MoE layer over grouped rows (group.cuh), for few rows
// per expert (decode: 1-16), as ONE launch for gate+up with the GLU fused and ONE launch for down:
//   gate/up (P = 2): h[r, n] = glu(sum_c x[src(r), c] W1_e[n, c], sum_c x[src(r), c] W3_e[n, c])   (glu.cuh)
//   down    (P = 1): y[r, n] = sum_c h[r, c] W2_e[n, c]
// for every grouped row r of expert e (offsets[e] <= r < offsets[e + 1]); src(r) = token_of_row[r] for gate/up
// (x is the token-major activation), r itself for down (h is already grouped). x, h, y are f32; fp32 accumulation;
// the weights are dense (f32/bf16/f16) or MXFP4, decoded in registers by gemv.cuh's DenseW / Mxfp4W (the CPU
// decoder's values), and streamed once per row group: bandwidth-bound on the bytes of the touched experts.
//
// Grid: (ceil(n / (NR * kWarps / ks)), A). Row y of the grid is the y-th TOUCHED expert, active[y] (group_kernel
// writes the list on the device; the host sizes the grid by its bound min(E, T*K) and blocks at or past
// n_active exit at once): at decode (8 of 256 experts at T = 1) no block is spent on an untouched expert.
// Without a list (active null: E too large for group_kernel) row y is expert y and a block of an empty expert
// exits at once.
// Inside a block (gemv.cuh's structure): kWarps warps in groups of ks (1, 2 or 4, the launcher's choice from K
// alone); a group owns NR consecutive output columns of each of the P projections (rows past n are clamped for
// loads and never written) and splits K: lane l of the group's warp j takes chunks (32 j + l) + 32 ks u, with
// U chunks per weight row loaded before any arithmetic, so a lane keeps U * P * NR loads in flight (the bytes
// in flight that cover HBM latency come from loads per lane, not from threads). A group walks its expert's rows
// in groups of MT (looping when the expert has more: the weight tile is then re-read, from L2), each lane
// holding acc[P * NR][MT]; then a warp-shuffle reduction, the group's warps summed through shared memory
// (ks > 1), and the group's first warp applies the GLU (P = 2) or stores (P = 1).
// The summation order of an output depends only on K, ks and the lane split (host-side shapes), never on the
// row's position in its group, on MT or on the (atomic) order of rows within an expert: replays are
// bit-identical, and a token's result does not depend on which other tokens share its experts.
// The shared expert can ride along (shared_rows > 0, the launcher's choice when it has the experts' shapes and
// format): one more grid row whose blocks run the same code on the shared weights over the T token rows placed
// after the routed rows, so a decode step streams routed and shared weights in the same two launches.
// With the list, the weight loads of the first row group depend only on active[y] (never on the offsets), so
// they are issued before the rows are known: two dependent latencies before streaming instead of three.
//
// Expert weights: ExpertProj gives expert e's pointers either from a base and a byte stride (stacked experts:
// one allocation per projection, as place_weights builds) or from a device table of ExpertPtr (experts
// allocated separately; the launcher uploads it per call). Both read the same bytes: the same results (given
// the same `vec`, below).
// Alignment: `vec` (checked by the launcher over every expert) selects 16-byte (dense) / 8-byte (MXFP4) weight
// loads and float4 x loads; `vec` = 0 runs the same math with scalar loads.
#pragma once

#include <cstdint>

#include "cuda/linear/gemv.cuh"
#include "cuda/moe/glu.cuh"

namespace kimi::cuda {

constexpr int kGroupedThreads = 128;
constexpr int kGroupedWarps = kGroupedThreads / 32;

// One projection of one expert: dense [n, k] (rows ldw elements apart) or MXFP4 packed [n, k/2] (rows ldw bytes
// apart) with scale [n, k/32] (rows lds bytes apart; null for dense).
struct ExpertPtr {
  const void* w;
  const uint8_t* scale;
  int64_t ldw, lds;
};

// One projection of every expert: table[e] when table is set, else expert 0's pointers advanced by e strides.
struct ExpertProj {
  ExpertPtr first;
  int64_t w_stride, s_stride;  // bytes between consecutive experts (stacked form)
  const ExpertPtr* table;      // device [E] (separately allocated experts) or null
};

__device__ __forceinline__ ExpertPtr expert_ptr(const ExpertProj& p, int e) {
  if (p.table) return p.table[e];
  ExpertPtr r = p.first;
  r.w = static_cast<const char*>(r.w) + int64_t(e) * p.w_stride;
  if (r.scale) r.scale += int64_t(e) * p.s_stride;
  return r;
}

struct GroupedArgs {
  const int32_t* offsets;   // [E + 1]
  const int32_t* active;    // [gridDim.y]: touched experts (group_kernel), or null: blockIdx.y is the expert
  const int32_t* n_active;  // [1]: entries of active that are set (with active)
  const int32_t* src_row;   // [rows]: the x row of grouped row r; null: r itself
  const float* x;           // f32, rows ldx apart
  int64_t ldx;
  ExpertProj proj[2];  // gate, up (P = 2) or down (proj[0])
  int64_t n, k;        // output columns per projection, input width
  float* y;            // f32 [rows, n] in grouped order, rows ldy apart
  int64_t ldy;
  int situ;
  float beta, lbeta;
  int vec;
  int ks;  // warps per column group splitting K: 1, 2 or 4
  // The fused shared expert (shared_rows > 0): the grid's last row, rows [shared_row0, shared_row0 + shared_rows)
  // of x / y with x row r - shared_src0 (gate/up: the token, shared_src0 = shared_row0; down: r, 0).
  ExpertPtr shared[2];
  int32_t shared_rows, shared_row0, shared_src0;
};

// U: chunks per weight row in flight per lane.
template <int MT, int NR, int U, int P, class WF>
__global__ void __launch_bounds__(kGroupedThreads) grouped_kernel(GroupedArgs a) {
  constexpr int R = P * NR;  // weight rows of a column group: NR of each projection
  int e = int(blockIdx.y);
  const bool shared = a.shared_rows > 0 && e == int(gridDim.y) - 1;
  if (!shared && a.active) {
    if (e >= *a.n_active) return;
    e = a.active[e];
  }
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32, ks = a.ks, part_k = warp % ks;
  const int64_t n0 = (int64_t(blockIdx.x) * (kGroupedWarps / ks) + warp / ks) * NR;
  const bool live = n0 < a.n;  // a dead group still reaches the barriers below
  int64_t rows[NR];
#pragma unroll
  for (int r = 0; r < NR; ++r) rows[r] = min(n0 + r, a.n - 1);  // clamped: loads stay in bounds
  GemvArgs wa[P];
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const ExpertPtr ep = shared ? a.shared[p] : expert_ptr(a.proj[p], e);
    wa[p] = GemvArgs{};
    wa[p].w = ep.w;
    wa[p].ldw = ep.ldw;
    wa[p].scale = ep.scale;
    wa[p].lds = ep.lds;
  }
  constexpr int C = WF::kChunk;
  const int64_t kv = live && a.vec ? (a.k / C) * C : 0;  // columns covered by whole chunks
  const int64_t k_end = live ? a.k : 0;
  const int64_t step = int64_t(32) * ks * C;  // between a lane's consecutive chunks
  __shared__ float red[kGroupedWarps][R * MT];
  const int32_t r_begin = shared ? a.shared_row0 : a.offsets[e];
  const int32_t r_end = shared ? a.shared_row0 + a.shared_rows : a.offsets[e + 1];
  if (!shared && !a.active && r_begin == r_end) return;  // block-uniform; a listed expert always has rows
  const int32_t* src = shared ? nullptr : a.src_row;      // x row of grouped row r: src[r], else r - src0
  const int64_t src0 = shared ? a.shared_src0 : 0;

  int32_t g0 = r_begin;
  do {  // row groups; the first one's weight loads do not wait for the offsets
    const int m = min(MT, int(r_end - g0));  // rows in this group (block-uniform)
    float acc[R][MT];
#pragma unroll
    for (int j = 0; j < R; ++j)
#pragma unroll
      for (int i = 0; i < MT; ++i) acc[j][i] = 0.f;

    for (int64_t c0 = (int64_t(part_k) * 32 + lane) * C; c0 < kv; c0 += step * U) {
      typename WF::Raw raw[U][R];
#pragma unroll
      for (int u = 0; u < U; ++u) {  // every load of the round first
        const int64_t c = c0 + u * step;
        if (c < kv) {
#pragma unroll
          for (int p = 0; p < P; ++p)
#pragma unroll
            for (int r = 0; r < NR; ++r) WF::load(wa[p], rows[r], c, raw[u][p * NR + r]);
        }
      }
      const float* xr[MT];
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        const int32_t r = g0 + min(i, m - 1);
        xr[i] = a.x + (src ? int64_t(src[r]) : r - src0) * a.ldx;
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t c = c0 + u * step;
        if (c >= kv) break;
#pragma unroll
        for (int part = 0; part < C / 8; ++part) {
          float wv[R][8];
#pragma unroll
          for (int j = 0; j < R; ++j) WF::decode(raw[u][j], part, wv[j]);
#pragma unroll
          for (int i = 0; i < MT; ++i) {
            if (i >= m) break;
            const float4* xp = reinterpret_cast<const float4*>(xr[i] + c + part * 8);
            const float4 x0 = __ldg(xp), x1 = __ldg(xp + 1);
            const float xv[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
            for (int j = 0; j < R; ++j)
#pragma unroll
              for (int q = 0; q < 8; ++q) acc[j][i] = fmaf(wv[j][q], xv[q], acc[j][i]);
          }
        }
      }
    }
    for (int64_t c = kv + part_k * 32 + lane; c < k_end; c += 32 * ks) {  // tail / unaligned: scalar
      float wv[R];
#pragma unroll
      for (int p = 0; p < P; ++p)
#pragma unroll
        for (int r = 0; r < NR; ++r) wv[p * NR + r] = WF::scalar(wa[p], rows[r], c);
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        if (i >= m) break;
        const int32_t row = g0 + i;
        const float xv = a.x[(src ? int64_t(src[row]) : row - src0) * a.ldx + c];
#pragma unroll
        for (int j = 0; j < R; ++j) acc[j][i] = fmaf(wv[j], xv, acc[j][i]);
      }
    }

    // Warp reduction (every lane ends with every sum), then the group's other warps through shared memory;
    // output (r, i) (column n0 + r, row g0 + i) is written by lane (r MT + i) % 32 of the group's first warp.
#pragma unroll
    for (int j = 0; j < R; ++j)
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        float v = acc[j][i];
#pragma unroll
        for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
        acc[j][i] = v;
        if (ks > 1 && lane == 0) red[warp][j * MT + i] = v;
      }
    if (ks > 1) __syncthreads();
    if (live && part_k == 0) {
#pragma unroll
      for (int r = 0; r < NR; ++r)
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          if (i >= m || lane != (r * MT + i) % 32 || n0 + r >= a.n) continue;
          float s[P];
#pragma unroll
          for (int p = 0; p < P; ++p) {
            s[p] = acc[p * NR + r][i];
            for (int j = 1; j < ks; ++j) s[p] += red[warp + j][(p * NR + r) * MT + i];
          }
          float v = s[0];
          if constexpr (P == 2) v = glu_value(s[0], s[1], a.situ, a.beta, a.lbeta);
          a.y[int64_t(g0 + i) * a.ldy + n0 + r] = v;
        }
    }
    if (ks > 1) __syncthreads();  // red is reused by the next row group
    g0 += MT;
  } while (g0 < r_end);
}

}  // namespace kimi::cuda
