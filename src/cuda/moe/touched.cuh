// src/cuda/moe/touched.cuh: the routed experts of one MoE layer over grouped rows (group.cuh) at decode, over the
// TOUCHED experts only, as ONE launch for gate+up with the GLU fused and ONE launch for down (grouped.cuh has the
// same math with one grid row per expert):
//   gate/up (P = 2): h[r, n] = glu(sum_c x[src(r), c] W1_e[n, c], sum_c x[src(r), c] W3_e[n, c])   (glu.cuh)
//   down    (P = 1): y[r, n] = sum_c h[r, c] W2_e[n, c]
// for every grouped row r of expert e (offsets[e] <= r < offsets[e + 1]); src(r) = token_of_row[r] for gate/up
// (x is the token-major activation), r itself for down (h is already grouped). x, h, y are f32; fp32
// accumulation; the weights are dense (f32/bf16/f16) or MXFP4, decoded in registers by gemv.cuh's DenseW /
// Mxfp4W (the CPU decoder's values), and streamed once per row group of MT rows: bandwidth-bound on the bytes of
// the touched experts.
//
// Grid: (ceil(n / (NR * kTouchedWarps / ks)), shared_grid + routed rows). Grid row shared_grid + y is the y-th
// touched expert, active[y] (group_kernel writes the list on the device; the host sizes the routed rows by the
// bound min(E, T*K) and rows at or past n_active exit at once): no block is spent on an untouched expert.
// Inside a block (gemv.cuh's structure): kTouchedWarps warps in groups of ks (1, 2 or 4: from K alone for the
// in-flight tile, 4 for the streaming tile; experts.cu launch_touched_mt has both tiles); a group owns NR
// consecutive output columns of each of the P projections (columns past n are clamped for loads and never
// written) and splits K: lane l of the group's warp j takes chunks (32 j + l) + 32 ks u, with U chunks per weight
// row loaded before any arithmetic, so a lane keeps U * P * NR loads in flight.
// A group walks its expert's rows in groups of MT (looping when the expert has more: the weight tile is then
// re-read, from L2), each lane holding acc[P * NR][MT] over its chunks, so one streamed weight tile serves all
// MT rows of the group; then a warp-shuffle reduction, the group's warps summed through shared memory (ks > 1),
// and the group's first warp applies the GLU (P = 2) or stores (P = 1).
// The summation order of an output depends only on K, ks and the lane split (host-side shapes and the tile), never
// on the row's position in its group, on MT, NR, U or on the (atomic) order of rows within an expert: replays are
// bit-identical, and a token's result does not depend on which other tokens share its experts.
// The shared expert can ride along (shared_rows > 0, the launcher's choice when it has the experts' shapes and
// format): shared_grid = ceil(shared_rows / MT) grid rows FIRST, row j running the same code on the shared weights
// over shared rows [j MT, (j + 1) MT) (placed after the routed rows in x / y), so a decode step streams routed
// and shared weights in the same two launches without raising MT (the routed experts' register tile) to T.
// PDL (pdl.cuh): the in-flight tile at MT = 1 issues its first round of weight loads before pdl_wait (the other
// tiles after it). They depend only on the expert: the shared rows know theirs from the arguments, so the gate/up
// launch's shared-row blocks (first in the grid) start streaming while group_kernel runs; a touched expert's
// comes from the list, which the gate/up launch reads after its wait and the down launch (list_ready) before it:
// every block of the launch before the down launch (gate/up) calls pdl_launch_dependents only after its own
// pdl_wait returned, so the down launch starts after group_kernel (and any pointer-table upload) completed, and
// reads the list from L2 (ld.global.cg).
// Column tiles: grid.x blocks walk tiles_x column tiles (bx, bx + gridDim.x, ...). One each, except the in-flight
// tile at MT = 1 (T = 1: one row per expert), whose launcher fits the launch in one wave of blocks; a block then
// issues the next tile's first round before the current tile's reduction, so its loads stay in flight through
// the reductions and the prologue (list, pointers) is paid once.
//
// The weight-stream steps (a chunk's loads, the tail's scalar weights, the streaming tile's warp sums) are
// expert_tile.cuh's, shared with grouped.cuh.
// Expert weights: ExpertProj (expert_tile.cuh) gives expert e's pointers from a base and a byte stride (stacked
// experts) or from a device table (separately allocated experts, uploaded per call).
// Alignment: `vec` (checked by the launcher over every expert and the shared expert) selects 16-byte (dense) /
// 8-byte (MXFP4) weight loads and float4 x loads; `vec` = 0 runs the same math with scalar loads.
#pragma once

#include <cstdint>

#include "cuda/linear/gemv.cuh"
#include "cuda/moe/expert_tile.cuh"
#include "cuda/moe/glu.cuh"
#include "cuda/pdl.cuh"

namespace kimi::cuda {

constexpr int kTouchedThreads = 128;
constexpr int kTouchedWarps = kTouchedThreads / 32;

struct TouchedArgs {
  const int32_t* offsets;   // [E + 1]
  const int32_t* active;    // [min(E, T*K)]: touched experts ascending (group_kernel)
  const int32_t* n_active;  // [1]: entries of active that are set
  int list_ready;           // 1: active / n_active are complete before this launch's pdl_wait (the down launch)
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
  int32_t tiles_x;  // column tiles per grid row (ceil(n / columns per block)); more than gridDim.x: kEarly only
  // The fused shared expert (shared_rows > 0): rows [shared_row0, shared_row0 + shared_rows) of x / y with x row
  // r - shared_src0 (gate/up: the token, shared_src0 = shared_row0; down: r, 0), on grid rows 0 .. shared_grid - 1
  // (ceil(shared_rows / MT); the touched experts' grid rows follow).
  ExpertPtr shared[2];
  int32_t shared_rows, shared_row0, shared_src0, shared_grid;
};

// U: chunks per weight row in flight per lane. kStreaming (the streaming tile, as grouped.cuh): the x rows are
// found once per row group, and every warp's sums go through shared memory and a lane of the group's first warp
// adds them (the accumulators die at their shuffle: fewer registers for the wide tile); else (the in-flight tile)
// the x rows are found after each round's weight loads are issued, and the first warp adds the others' sums to
// its own shuffled accumulators. Both add warp 0's sum, then warps 1 .. ks-1 in order: the same bits.
// Blocks per SM that ptxas must fit (__launch_bounds__; 0: no bound, ptxas's own choice, which an explicit 1 would
// change): the in-flight tile at MT = 1 keeps the next tile's round in flight during the reduction, which raises
// its registers (bf16: 148 / 107 for gate+up / down unbounded); 4 and 6 blocks (at most 128 / 80 registers) keep
// the one-tile-per-block occupancy without spills (ptxas -v, sm_90a).
template <int MT, int P, bool kStreaming>
constexpr int kTouchedMinBlocks = !kStreaming && MT == 1 ? (P == 2 ? 4 : 6) : 0;

template <int MT, int NR, int U, int P, class WF, bool kStreaming>
__global__ void __launch_bounds__(kTouchedThreads, kTouchedMinBlocks<MT, P, kStreaming>)
    touched_kernel(TouchedArgs a) {
  constexpr int R = P * NR;  // weight rows of a column group: NR of each projection
  const int gy = int(blockIdx.y);
  const bool shared = gy < a.shared_grid;  // the shared expert's grid rows come first
  const int ry = gy - a.shared_grid;       // the routed row: the ry-th touched expert
  bool waited = false;
  if (!shared && !a.list_ready) pdl_wait(), waited = true;  // the list comes from the kernel before
  int e = 0;
  if (!shared) {  // two independent L2 reads (active has min(E, T*K) entries; those from n_active on are stale)
    const int32_t n_active = __ldcg(a.n_active);
    e = __ldcg(a.active + ry);
    if (ry >= n_active) return;  // an exit counts as the PDL trigger
  }
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32, ks = a.ks, part_k = warp % ks;
  GemvArgs wa[P];
#pragma unroll
  for (int p = 0; p < P; ++p) set_weight_args(wa[p], shared ? a.shared[p] : expert_ptr(a.proj[p], e));
  constexpr int C = WF::kChunk;
  // The column tile bx (blockIdx.x, + gridDim.x, ... < tiles_x): this group's first column n0, its weight rows.
  int bx = int(blockIdx.x);
  int64_t n0, kv, k_end, rows[NR];
  bool live;
  const auto set_tile = [&] {
    n0 = (int64_t(bx) * (kTouchedWarps / ks) + warp / ks) * NR;
    live = n0 < a.n;  // a dead group still reaches the barriers below
#pragma unroll
    for (int r = 0; r < NR; ++r) rows[r] = min(n0 + r, a.n - 1);  // clamped: loads stay in bounds
    kv = live && a.vec ? (a.k / C) * C : 0;  // columns covered by whole chunks
    k_end = live ? a.k : 0;
  };
  set_tile();
  const int64_t step = int64_t(32) * ks * C;  // between a lane's consecutive chunks
  const int64_t c_first = (int64_t(part_k) * 32 + lane) * C;
  typename WF::Raw raw[U][R];  // one round: U chunks of every weight row
  const auto load_round = [&](int64_t c0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {  // every load of the round first
      const int64_t c = c0 + u * step;
      if (c < kv) load_chunk<P, NR, WF>(wa, rows, c, raw[u]);
    }
  };
  // The in-flight tile at MT = 1 (T = 1) issues the first row group's first round (weights only) before the wait;
  // the other tiles keep their loads in the loop (hoisting them costs them registers or spills: ptxas -v).
  constexpr bool kEarly = !kStreaming && MT == 1;
  if constexpr (kEarly) load_round(c_first);
  if (!waited) pdl_wait();
  pdl_launch_dependents();  // after the wait: the next launch may read the list before its own wait (list_ready)
  __shared__ float red[kTouchedWarps][R * MT];
  int32_t r_begin, r_end;
  if (shared) {  // one MT-row group of the shared rows per grid row
    r_begin = a.shared_row0 + gy * MT;
    r_end = min(a.shared_row0 + a.shared_rows, r_begin + MT);
  } else {  // a listed expert always has rows
    r_begin = a.offsets[e];
    r_end = a.offsets[e + 1];
  }
  const int32_t* src = shared ? nullptr : a.src_row;  // x row of grouped row r: src[r], else r - src0
  const int64_t src0 = shared ? a.shared_src0 : 0;

  bool loaded = kEarly;  // raw holds the next round's loads
  for (bool more = true; more;) {  // column tiles (several per block only for kEarly: tiles_x > gridDim.x)
    more = false;
    const int64_t n0c = n0;  // this tile's columns (set_tile moves on to the next tile before the reduction)
    const bool livec = live;
    int32_t g0 = r_begin;
    do {  // row groups; the first one's weight loads do not wait for the offsets
      const int m = min(MT, int(r_end - g0));  // rows in this group (block-uniform)
      float acc[R][MT];
#pragma unroll
      for (int j = 0; j < R; ++j)
#pragma unroll
        for (int i = 0; i < MT; ++i) acc[j][i] = 0.f;
      const float* xr[MT];  // the group's x rows (row g0 + i, the last one repeated past m)
      const auto x_rows = [&] {
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          const int32_t r = g0 + min(i, m - 1);
          xr[i] = a.x + (src ? int64_t(src[r]) : r - src0) * a.ldx;
        }
      };
      if constexpr (kStreaming) x_rows();  // once per row group, before the loop

      for (int64_t c0 = c_first; c0 < kv; c0 += step * U) {
        if (!loaded) load_round(c0);
        loaded = false;
        if constexpr (!kStreaming) x_rows();  // after the round's weight loads are issued
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
      loaded = false;
      for (int64_t c = kv + part_k * 32 + lane; c < k_end; c += 32 * ks) {  // tail / unaligned: scalar
        float wv[R];
        tail_weights<P, NR, WF>(wa, rows, c, wv);
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          if (i >= m) break;
          const int32_t row = g0 + i;
          const float xv = a.x[(src ? int64_t(src[row]) : row - src0) * a.ldx + c];
#pragma unroll
          for (int j = 0; j < R; ++j) acc[j][i] = fmaf(wv[j], xv, acc[j][i]);
        }
      }
      if constexpr (kEarly) {  // the last row group: the next tile's first round before this tile's reduction
        if (g0 + MT >= r_end && bx + int(gridDim.x) < a.tiles_x) {
          bx += int(gridDim.x);
          set_tile();
          load_round(c_first);
          loaded = more = true;
        }
      }

      if constexpr (kStreaming) {
        warp_sums(acc, m, lane, red[warp]);
        __syncthreads();
        if (livec && part_k == 0) {
          for (int t = lane; t < NR * MT; t += 32) {  // output (r, i): column n0c + r, row g0 + i
            const int r = t / MT, i = t % MT;
            if (i >= m || n0c + r >= a.n) continue;
            float s[P];
#pragma unroll
            for (int p = 0; p < P; ++p) {
              s[p] = red[warp][(p * NR + r) * MT + i];
              for (int j = 1; j < ks; ++j) s[p] += red[warp + j][(p * NR + r) * MT + i];
            }
            float v = s[0];
            if constexpr (P == 2) v = glu_value(s[0], s[1], a.situ, a.beta, a.lbeta);
            a.y[int64_t(g0 + i) * a.ldy + n0c + r] = v;
          }
        }
        __syncthreads();  // red is reused by the next row group
      } else {
        // Warp reduction (every lane ends with every sum), then the group's other warps through shared memory;
        // output (r, i) (column n0c + r, row g0 + i) is written by lane (r MT + i) % 32 of the group's first warp.
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
        if (livec && part_k == 0) {
#pragma unroll
          for (int r = 0; r < NR; ++r)
#pragma unroll
            for (int i = 0; i < MT; ++i) {
              if (i >= m || lane != (r * MT + i) % 32 || n0c + r >= a.n) continue;
              float s[P];
#pragma unroll
              for (int p = 0; p < P; ++p) {
                s[p] = acc[p * NR + r][i];
                for (int j = 1; j < ks; ++j) s[p] += red[warp + j][(p * NR + r) * MT + i];
              }
              float v = s[0];
              if constexpr (P == 2) v = glu_value(s[0], s[1], a.situ, a.beta, a.lbeta);
              a.y[int64_t(g0 + i) * a.ldy + n0c + r] = v;
            }
        }
        if (ks > 1) __syncthreads();  // red is reused by the next row group
      }
      g0 += MT;
    } while (g0 < r_end);
  }
}

}  // namespace kimi::cuda
