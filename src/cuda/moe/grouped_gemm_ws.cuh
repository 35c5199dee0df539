// src/cuda/moe/grouped_gemm_ws.cuh: the warp-specialized, persistent form of grouped_gemm.cuh's dense-bf16 grouped
// expert GEMM on Hopper, for STACKED dense bf16 experts (expert e's projection at base + e * stride); the same math,
// tiles, Args and epilogue:
//   gate/up (P = 2): H[r, n] = bf16(glu(sum_c A[r, c] W1_e[n, c], sum_c A[r, c] W3_e[n, c]))   (glu.cuh's glu_value)
//   down    (P = 1): Y[r, n] = sum_c A[r, c] W2_e[n, c]                             (f32 out, or bf16: y_bf16)
// for every grouped row r of expert e (offsets[e] <= r < offsets[e + 1]). bf16 x bf16 products, fp32 accumulation
// (wgmma m64n256k16), one rounding of H to bf16. MXFP4 and separately allocated experts keep grouped_gemm.cuh
// (experts.cu's launcher decides: docs/ops/moe.md "The grouped GEMM kernels").
//
// Tiles (grouped_gemm.cuh's): BM = 128 grouped rows of ONE expert x BW = 256 weight rows (gate/up: 128 columns of
// W1 and the same 128 of W3, so the GLU's inputs meet in one thread; down: 256 columns of W2), k in BK = 64 steps.
// Tile t of the launch is (M-tile t / n_tiles, N-tile t % n_tiles), M-tiles from the device prefix tile_off
// (mtile_offsets_kernel; the total tile_off[E] read on the device: no host sync, graph-capturable), the expert of an
// M-tile by expert_of_mtile. Consecutive tiles share an M-tile (its A rows once from memory, its expert's weights
// through L2).
//
// Persistent grid: min(#SMs, an upper bound on the tiles) CTAs of 384 threads, one per SM; CTA b walks tiles
// t = b, b + gridDim.x, ... < tile_off[E] * n_tiles. Warpgroup 0 is the producer (setmaxnreg down to 40 registers:
// thread 0 alone issues every copy, the other 127 threads leave at once), warpgroups 1 and 2 the consumers (up to
// 232 registers), each one wgmma m64n256k16 per k-step of 16 over its 64 rows of the M-tile and the whole 256-row
// weight tile (acc[32][4], 128 f32 per thread), then the epilogue (grouped_gemm.cuh store_tile) straight from the
// fragments to y. The producer runs up to S k-tiles ahead across tile boundaries, so tile i's epilogue overlaps
// tile i + 1's loads.
//
// Loads: bulk tensor copies (TMA) through three tensor maps built by the launcher (experts.cu), bf16, 128-byte
// swizzle, zeros outside the tensor (counted in the transaction bytes like any other):
//   A: 2-d {k, rows} (rows = T*K grouped rows, lda apart), box {64, 128}: the M-tile's 128 rows from r0, whatever
//      expert they belong to; rows past the expert's end are multiplied but never stored (row r of D depends on row
//      r of A alone); rows past T*K and columns past k are zeros.
//   W: 3-d {k, n, E} (rows ldw apart, experts w_stride bytes apart), box {64, 256 / P, 1}: rows n0 .. of expert e;
//      rows past n and columns past k are zeros (never another expert's rows). Gate/up: W1's box at weight rows
//      0 .. 127 of the stage, W3's at 128 .. 255; down: one box of 256 rows.
// The 128B swizzle of the copy engine (16-byte chunk c of box row r at chunk c ^ (r % 8), rows 128 bytes apart,
// 1024-byte aligned destinations) is wgmma.cuh's sw128_off layout: A [128][64] and B [256][64] K-major, D = A W^T.
//
// Shared memory (dynamic, 1024-byte aligned): S = 4 stages of [A: 128 x 64 | B: 256 x 64] bf16 = 48 KB each
// (192 KB; a fifth stage would pass the 227 KB a block may hold), then the mbarriers full[S] and empty[S].
//
// Pipeline. Both sides count k-tile uses u = 0, 1, ... over the CTA's whole tile walk; use u takes stage
// s = u % S in phase u / S, parity p = (u / S) & 1.
//   producer (one thread): wait empty[s] for parity p ^ 1 (the consumers released use u - S; a fresh barrier
//     passes parity 1 at once), mbar_expect_tx(full[s], 48 KB) (the phase's one arrival), then the A box and the
//     one or two W boxes into stage s, completing on full[s].
//   consumers (both warpgroups): wait full[s] for parity p, wgmma::fence, 4 wgmma (k-steps of 16 = 32 bytes into
//     the swizzle atom), commit, wgmma::wait<1> (use u - 1's group done in this warpgroup), then lane 0 of each
//     consumer warp arrives on empty of use u - 1's stage (8 arrivals complete its phase). After a tile's last
//     k-tile: wait<0>, release its stage, fence_operands, the epilogue, zero the accumulators.
//   full[s] gets use u + S only after empty[s] completed the phase of use u, i.e. after every consumer passed its
//   wait on use u (mbarrier parity cannot tell phase u from u + 2: bulk_copy.cuh's protocol); a stage is
//   overwritten only after both warpgroups' wgmma that read it completed. No __syncthreads after the set-up.
// Numerics: every output element is the same sequence of wgmma over the same operand values as grouped_gemm.cuh
// (k-tiles in order, 4 k-steps each, zeros where that kernel zero-fills, the same store_tile epilogue), so the
// two kernels should agree bit for bit; rows of other experts in the A tile touch only rows that are not stored.
// Results do not depend on the atomic order of rows within an expert or on the CTA walking a tile.
// Requirements (checked by the launcher): dense bf16 stacked experts with w_stride > 0 a multiple of 16 bytes,
// k % 8 == 0, n % 8 == 0, lda and ldw multiples of 8 elements, A and the weights 16-byte aligned, ldy even, the
// driver's cuTensorMapEncodeTiled.
#pragma once

#include <cuda.h>  // CUtensorMap
#include <cuda_bf16.h>

#include <cstdint>

#include "cuda/bulk_copy.cuh"
#include "cuda/moe/grouped_gemm.cuh"
#include "cuda/wgmma.cuh"

namespace kimi::cuda::moe_gemm {

constexpr int kWsThreads = 384;        // producer warpgroup + two consumer warpgroups
constexpr int kWsConsumerWarps = 8;    // arrivals per phase of an empty barrier
constexpr int kWsProducerRegs = 40;    // setmaxnreg budgets: 128 x 40 + 256 x 232 <= 64 K registers
constexpr int kWsConsumerRegs = 232;
constexpr uint32_t kWsStageBytes = uint32_t(kStageElems) * 2;  // 48 KB: the transaction bytes of one k-tile
// stages, 2 S mbarriers, + slack to align the base to 1024 bytes
constexpr int kWsSmemBytes = kStages * int(kWsStageBytes) + 2 * kStages * 8 + 1024;

// Box rows of one weight map: gate/up's two maps fill half the weight tile each.
template <int P>
constexpr int kWsBoxRows = kBW / P;

struct WsArgs {
  CUtensorMap a_map;     // A bf16 [rows, k]: 2-d {k, rows}, box {kBK, kBM}, 128B swizzle
  CUtensorMap w_map[2];  // W1, W3 (P = 2) or W2 (w_map[0]): 3-d {k, n, E}, box {kBK, kWsBoxRows<P>, 1}, 128B swizzle
  Args g;                // offsets, tile_off, e_count, n, k, y, ldy and the GLU fields (a, lda, proj: in the maps)
  int n_tiles;           // ceil(n / kBN<P>)
  int k_tiles;           // ceil(k / kBK)
};

// Tile t of the walk: expert e, grouped rows r0 .. min(r0 + kBM, r_end) - 1, output columns from n0.
struct WsTile {
  int e;
  int32_t r0, r_end;
  int n0;
};

template <int P>
__device__ __forceinline__ WsTile ws_tile(const WsArgs& a, int t) {
  const int mt = t / a.n_tiles;
  WsTile w;
  w.e = expert_of_mtile(a.g.tile_off, a.g.e_count, mt);
  w.r0 = a.g.offsets[w.e] + (mt - a.g.tile_off[w.e]) * kBM;
  w.r_end = a.g.offsets[w.e + 1];
  w.n0 = (t % a.n_tiles) * kBN<P>;
  return w;
}

template <int P>
__global__ void __launch_bounds__(kWsThreads, 1) grouped_gemm_ws_kernel(const __grid_constant__ WsArgs a) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* const base = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  __nv_bfloat16* const sm = reinterpret_cast<__nv_bfloat16*>(base);  // [kStages][kStageElems]
  uint64_t* const full = reinterpret_cast<uint64_t*>(base + kStages * kWsStageBytes);  // [kStages]
  uint64_t* const empty = full + kStages;                                              // [kStages]
  const int tid = int(threadIdx.x);
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], kWsConsumerWarps);
    }
    mbar_init_fence();
  }
  __syncthreads();

  const int tiles = a.g.tile_off[a.g.e_count] * a.n_tiles;
  // The warpgroup index as ptxas sees it warp-uniform (a broadcast), so no wgmma is serialized (C7520).
  const int wg = __shfl_sync(0xffffffffu, tid / 128, 0);
  if (wg == 0) {
    wgmma::regs_dec<kWsProducerRegs>();
    if (tid == 0) {
      tma_prefetch_map(&a.a_map);
      tma_prefetch_map(&a.w_map[0]);
      if constexpr (P == 2) tma_prefetch_map(&a.w_map[1]);
      int s = 0;
      uint32_t parity = 0;
      for (int t = int(blockIdx.x); t < tiles; t += int(gridDim.x)) {
        const WsTile w = ws_tile<P>(a, t);
        for (int kt = 0; kt < a.k_tiles; ++kt) {
          mbar_wait(&empty[s], parity ^ 1u);  // the consumers released this stage's previous use
          mbar_expect_tx(&full[s], kWsStageBytes);
          __nv_bfloat16* const sA = sm + s * kStageElems;
          __nv_bfloat16* const sB = sA + kBM * kBK;
          const int k0 = kt * kBK;
          tma_load_2d(sA, &a.a_map, k0, w.r0, &full[s]);
          tma_load_3d(sB, &a.w_map[0], k0, w.n0, w.e, &full[s]);
          if constexpr (P == 2) tma_load_3d(sB + kWsBoxRows<P> * kBK, &a.w_map[1], k0, w.n0, w.e, &full[s]);
          if (++s == kStages) {
            s = 0;
            parity ^= 1u;
          }
        }
      }
    }
  } else {
    wgmma::regs_inc<kWsConsumerRegs>();
    const int cw = wg - 1;                        // consumer warpgroup: rows 64 cw .. 64 cw + 63 of the M-tile
    const int t128 = tid % 128, lane = tid % 32;  // thread in the warpgroup, lane in the warp
    float acc[32][4];  // D[64 rows of this warpgroup][the 256 weight rows of the tile]
#pragma unroll
    for (int j = 0; j < 32; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[j][q] = 0.f;
    int s = 0, prev = 0;
    uint32_t parity = 0;
    for (int t = int(blockIdx.x); t < tiles; t += int(gridDim.x)) {
      const WsTile w = ws_tile<P>(a, t);  // its loads in flight during the main loop
      for (int kt = 0; kt < a.k_tiles; ++kt) {
        mbar_wait(&full[s], parity);  // k-tile kt of this tile has landed
        const __nv_bfloat16* const sA = sm + s * kStageElems;
        const uint64_t dA = wgmma::desc_sw128(sA + cw * 64 * kBK), dB = wgmma::desc_sw128(sA + kBM * kBK);
        wgmma::fence();
#pragma unroll
        for (int ks = 0; ks < kBK / 16; ++ks)  // a k-step of 16 is 32 bytes into the swizzle atom
          mma_m64n256k16(acc, wgmma::desc_add(dA, 32u * ks), wgmma::desc_add(dB, 32u * ks));
        wgmma::commit();
        wgmma::wait<1>();  // the previous k-tile's wgmma are done in this warpgroup
        if (kt > 0 && lane == 0) mbar_arrive(&empty[prev]);
        prev = s;
        if (++s == kStages) {
          s = 0;
          parity ^= 1u;
        }
      }
      wgmma::wait<0>();
      if (lane == 0) mbar_arrive(&empty[prev]);  // the tile's last k-tile: the producer may refill it now
      wgmma::fence_operands(acc);
      store_tile<P>(acc, a.g, w.r0 + cw * 64, w.r_end, w.n0, t128);
#pragma unroll
      for (int j = 0; j < 32; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q) acc[j][q] = 0.f;
    }
  }
}

}  // namespace kimi::cuda::moe_gemm
