// src/cuda/moe/grouped_gemm.cuh: the routed experts of one MoE layer over grouped rows (group.cuh) on Hopper tensor
// cores, for many rows per expert (prefill), as ONE launch for gate+up with the GLU fused and ONE launch for down:
//   gate/up (P = 2): H[r, n] = bf16(glu(sum_c A[r, c] W1_e[n, c], sum_c A[r, c] W3_e[n, c]))   (glu.cuh's glu_value)
//   down    (P = 1): Y[r, n] = sum_c A[r, c] W2_e[n, c]                             (f32 out, or bf16: y_bf16)
// for every grouped row r of expert e (offsets[e] <= r < offsets[e + 1]). A is bf16 in grouped order ([rows, k],
// rows lda apart: the gathered z for gate/up, H for down); weights dense bf16 [n, k] (rows ldw elements apart) or
// MXFP4 (kMx: packed u8 [n, k/2], rows ldw bytes apart, E8M0 scales [n, k/32], rows lds apart), found per expert by
// expert_tile.cuh's ExpertProj (stacked base + e * stride, or a device table). bf16 x bf16 products, fp32 accumulation
// (wgmma m64n256k16), one rounding of H to bf16 (the rounding a bf16 activation implies). MXFP4 weights are decoded
// into the bf16 weight tile in shared memory (W4A16): code * scale is exact in bf16, so both forms multiply the
// same values as the CPU's decoder (src/cuda/linear/mxfp4.cuh). grouped_gemm_ws.cuh is the warp-specialized,
// persistent form of this kernel for stacked dense bf16 experts (TMA loads; the same tiles and epilogue, store_tile).
//
// Tiles. A CTA computes BM = 128 rows of ONE expert against a weight tile of BW = 256 rows: for gate/up, 128
// output columns of W1 and the same 128 of W3 (so the GLU's two inputs land in the same thread, same fragment
// position); for down, 256 output columns of W2. Two consumer warpgroups own 64 rows each, each one
// wgmma.m64n256k16 per k-step of 16 over the whole weight tile (acc[32][4], 128 f32 registers per thread; A is
// read from shared memory once per 256 columns); all 256 threads also load. K is walked in BK = 64 steps.
//
// Scheduling (no host sync, graph-capturable). mtile_offsets_kernel (one block) turns the device offsets into a
// prefix of M-tiles per expert, tile_off[e] = sum_{e' < e} ceil(count_e' / BM) ([E + 1]). Grid = (N / BN_out,
// an upper bound on the M-tiles fixed on the host from T*K and E alone: floor(T*K / BM) + min(E, T*K), at most
// 65535: expert_path checks it). CTA (x, y) finds its expert as the largest e with tile_off[e] <= y (binary search;
// experts with no rows own no tile and cost nothing) and exits at once when y >= tile_off[E]. Consecutive CTAs
// walk the weight tiles of one M-tile: its rows of A are read from memory once, and the few M-tiles of an expert
// run close together, sharing its weights through L2.
//
// Shared memory (dynamic, 1024-byte aligned): S = 4 stages of [A: 128 x 64 | B: 256 x 64] bf16, each in
// wgmma.cuh's 128B-swizzled atom layout (sw128_off), 48 KB a stage, 192 KB in all (one CTA per SM); MXFP4 adds S
// staging tiles of the packed codes [256 rows][32 bytes] (8 KB each) and the 1 KB decode table: 225 KB in all.
// Both operands are K-major (A [m][k], B = W [n][k]): D = A W^T.
//
// Pipeline (every thread loads with cp.async, zero-filling rows past the expert's end, weight rows past n and
// chunks past k; each thread commits one cp.async group per k-step, empty or not):
//   prologue: k-tiles 0 .. S-3 into stages 0 .. S-3
//   step kt:  wait for k-tile kt (cp.async.wait_group S-3), fence.proxy.async, __syncthreads;
//             issue its 4 wgmma (one group), then load k-tile kt + S - 2 into stage (kt + S - 2) % S = the
//             stage k-tile kt - 2 used, then wgmma.wait_group 1 (k-tile kt - 1's group is done in this warpgroup).
//   The stage overwritten at step kt was last read by k-tile kt - 2's wgmma, which both warpgroups completed
//   before they passed step kt - 1's wait_group 1, hence before step kt's __syncthreads: one barrier per k-step,
//   one wgmma group in flight while the next one is issued.
//   MXFP4: the cp.async pieces of a k-tile are its packed codes (into the staging tile); after the barrier, thread t
//   decodes weight row t of k-tile kt (64 codes: a table lookup per code byte and a bf16 pair multiply by the
//   scale, two scales loaded into registers one step ahead) into the stage's bf16 B tile, fence.proxy.async, a
//   second __syncthreads, then the wgmma. The decode overlaps k-tile kt - 1's
//   wgmma (still in flight); the B tile it writes was last read by k-tile kt - 4's wgmma (done at step kt - 3).
// Epilogue straight from the accumulator fragments (wgmma.cuh's layout): bf16x2 stores of H (gate/up) or float2
// (bf16x2 with y_bf16) stores of Y (down), rows past the expert's end and columns past n skipped.
// Requirements (checked by the launcher): k % 8 == 0, n % 8 == 0, lda and ldw multiples of 8 elements, A and every
// expert's weights 16-byte aligned (cp.async 16-byte pieces); y rows ldy apart with ldy even. MXFP4: k % 32 == 0,
// ldw a multiple of 16 bytes (scales: any alignment, byte loads).
// Each output element's sum is formed the same way whatever the row's position, so results do not depend on the
// (atomic) order of rows within an expert, and eager runs and graph replays agree bit for bit.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "cuda/bulk_copy.cuh"
#include "cuda/linear/mxfp4.cuh"
#include "cuda/moe/glu.cuh"
#include "cuda/moe/grouped.cuh"
#include "cuda/wgmma.cuh"

namespace kimi::cuda::moe_gemm {

constexpr int kThreads = 256;  // two warpgroups
constexpr int kBM = 128;       // grouped rows per CTA (one expert)
constexpr int kBW = 256;       // weight rows per CTA
constexpr int kBK = 64;        // k per stage (one 128-byte swizzle atom wide)
constexpr int kStages = 4;
constexpr int kStageElems = (kBM + kBW) * kBK;
constexpr int kStagingBytes = kBW * kBK / 2;  // MXFP4: one k-tile's packed codes
// + slack to align the base to 1024 bytes
template <bool kMx>
constexpr int kSmemBytes = kStages * (kStageElems * 2 + (kMx ? kStagingBytes : 0)) + (kMx ? 1024 : 0) + 1024;

// Output columns per CTA: gate/up pair the same 128 columns of W1 and W3; down takes 256 columns of W2.
template <int P>
constexpr int kBN = P == 2 ? kBW / 2 : kBW;

struct Args {
  const int32_t* offsets;   // [E + 1] grouped row offsets
  const int32_t* tile_off;  // [E + 1] M-tile prefix (mtile_offsets_kernel)
  int e_count;
  const __nv_bfloat16* a;  // [rows, k] grouped, rows lda apart
  int64_t lda;
  ExpertProj proj[2];  // gate, up (P = 2) or down (proj[0]); dense bf16, or MXFP4 (the kernel's kMx)
  int64_t n, k;
  void* y;  // P = 2: bf16 H; P = 1: Y f32, or bf16 when y_bf16; [rows, n], rows ldy apart
  int64_t ldy;
  int y_bf16;  // P = 1: Y rounded once to bf16 (the fp32 sums' one rounding)
  int situ;
  float beta, lbeta;
};

constexpr int kScanThreads = 256;

// tile_off[e] = sum_{e' < e} ceil((offsets[e' + 1] - offsets[e']) / kBM), e = 0 .. E; ONE block of kScanThreads:
// thread i sums the tiles of its contiguous run of experts, a block scan of those sums gives each run its start.
static __global__ void __launch_bounds__(kScanThreads) mtile_offsets_kernel(const int32_t* __restrict__ offsets,
                                                                            int e_count, int32_t* __restrict__ tile_off) {
  __shared__ int32_t part[kScanThreads];
  const int i = int(threadIdx.x), per = (e_count + kScanThreads - 1) / kScanThreads;
  const int e0 = min(e_count, i * per), e1 = min(e_count, e0 + per);
  const auto tiles = [&](int e) { return (offsets[e + 1] - offsets[e] + kBM - 1) / kBM; };
  int32_t sum = 0;
  for (int e = e0; e < e1; ++e) sum += tiles(e);
  part[i] = sum;
  __syncthreads();
  for (int o = 1; o < kScanThreads; o *= 2) {  // inclusive Hillis-Steele scan of the run sums
    const int32_t v = i >= o ? part[i - o] : 0;
    __syncthreads();
    part[i] += v;
    __syncthreads();
  }
  int32_t run = part[i] - sum;  // exclusive start of this thread's run
  for (int e = e0; e < e1; ++e) {
    tile_off[e] = run;
    run += tiles(e);
  }
  if (i == kScanThreads - 1) tile_off[e_count] = part[i];
}

// The tables of ONE group of m rows (a dense MLP through the grouped kernels): offsets {0, m}, tile_off {0,
// ceil(m / kBM)}; launch with one thread.
static __global__ void one_group_kernel(int32_t m, int32_t* __restrict__ offsets, int32_t* __restrict__ tile_off) {
  offsets[0] = 0;
  offsets[1] = m;
  tile_off[0] = 0;
  tile_off[1] = (m + kBM - 1) / kBM;
}

// 16 bytes global -> shared by cp.async (L2 only); where !valid nothing is read and 16 zero bytes are written.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// D[64][256] += A[64][16] B[16][256] (bf16, fp32 accumulate), both operands K-major descriptors (wgmma.cuh's
// 128B-swizzled layout): one instruction per k-step for the CTA's whole 256-row weight tile, so A is read from
// shared memory once per 256 columns (m64n64 would read it four times).
__device__ __forceinline__ void mma_m64n256k16(float (&d)[32][4], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
      "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
      "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,"
      "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,"
      "%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,"
      "%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,"
      "%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127"
      "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]),
        "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]),
        "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
        "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]),
        "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),
        "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
        "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
        "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]),
        "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]),
        "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]),
        "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]),
        "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]),
        "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]),
        "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]),
        "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]),
        "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3]),
        "+f"(d[16][0]), "+f"(d[16][1]), "+f"(d[16][2]), "+f"(d[16][3]),
        "+f"(d[17][0]), "+f"(d[17][1]), "+f"(d[17][2]), "+f"(d[17][3]),
        "+f"(d[18][0]), "+f"(d[18][1]), "+f"(d[18][2]), "+f"(d[18][3]),
        "+f"(d[19][0]), "+f"(d[19][1]), "+f"(d[19][2]), "+f"(d[19][3]),
        "+f"(d[20][0]), "+f"(d[20][1]), "+f"(d[20][2]), "+f"(d[20][3]),
        "+f"(d[21][0]), "+f"(d[21][1]), "+f"(d[21][2]), "+f"(d[21][3]),
        "+f"(d[22][0]), "+f"(d[22][1]), "+f"(d[22][2]), "+f"(d[22][3]),
        "+f"(d[23][0]), "+f"(d[23][1]), "+f"(d[23][2]), "+f"(d[23][3]),
        "+f"(d[24][0]), "+f"(d[24][1]), "+f"(d[24][2]), "+f"(d[24][3]),
        "+f"(d[25][0]), "+f"(d[25][1]), "+f"(d[25][2]), "+f"(d[25][3]),
        "+f"(d[26][0]), "+f"(d[26][1]), "+f"(d[26][2]), "+f"(d[26][3]),
        "+f"(d[27][0]), "+f"(d[27][1]), "+f"(d[27][2]), "+f"(d[27][3]),
        "+f"(d[28][0]), "+f"(d[28][1]), "+f"(d[28][2]), "+f"(d[28][3]),
        "+f"(d[29][0]), "+f"(d[29][1]), "+f"(d[29][2]), "+f"(d[29][3]),
        "+f"(d[30][0]), "+f"(d[30][1]), "+f"(d[30][2]), "+f"(d[30][3]),
        "+f"(d[31][0]), "+f"(d[31][1]), "+f"(d[31][2]), "+f"(d[31][3])
      : "l"(a), "l"(b), "r"(1)
      : "memory");
}

// MXFP4 decode by table: lut[b] holds the two bf16 magnitudes-with-sign of code byte b (low nibble first) at scale
// 1; a k-tile's scale 2^(e - 127) multiplies them as a bf16 pair (a power of two: exact, as the CPU's one f32
// product is, including the f32 subnormal 2^-127 of e = 0 and NaN for e = 255).
__device__ __forceinline__ void fill_mxfp4_lut(uint32_t* lut, int tid) {
  if (tid < 256) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(e2m1_value(uint32_t(tid) & 15u), e2m1_value(uint32_t(tid) >> 4));
    lut[tid] = *reinterpret_cast<const uint32_t*>(&v);
  }
}

__device__ __forceinline__ __nv_bfloat162 e8m0_pair(uint32_t e) {
  const __nv_bfloat16 s = __float2bfloat16_rn(e8m0_value(e));  // exact: a power of two in bf16's range, or NaN
  return __nv_bfloat162(s, s);
}

// Weight row t of the CTA's tile (t < kBW) decoded from the staging tile into the bf16 B tile: 64 codes, the first
// 32 under scale s0, the next 32 under s1.
__device__ __forceinline__ void decode_mxfp4_row(const uint8_t* staging, const uint32_t* lut, __nv_bfloat16* sB, int t,
                                                 __nv_bfloat162 s0, __nv_bfloat162 s1) {
  const uint4 p0 = *reinterpret_cast<const uint4*>(staging + t * 32);
  const uint4 p1 = *reinterpret_cast<const uint4*>(staging + t * 32 + 16);
  const uint32_t words[8] = {p0.x, p0.y, p0.z, p0.w, p1.x, p1.y, p1.z, p1.w};
#pragma unroll
  for (int c = 0; c < 8; ++c) {  // 8 columns per word, two per byte, low nibble first
    const __nv_bfloat162 sc = c < 4 ? s0 : s1;
    uint32_t out[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t raw = lut[(words[c] >> (8 * j)) & 255u];
      const __nv_bfloat162 v = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&raw), sc);
      out[j] = *reinterpret_cast<const uint32_t*>(&v);
    }
    *reinterpret_cast<uint4*>(sB + wgmma::sw128_off<kBW>(t, 8 * c)) = make_uint4(out[0], out[1], out[2], out[3]);
  }
}

// The expert of M-tile mt < tile_off[E]: the largest e with tile_off[e] <= mt (binary search; empty experts
// before it share its value).
__device__ __forceinline__ int expert_of_mtile(const int32_t* tile_off, int e_count, int mt) {
  int lo = 0, hi = e_count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (tile_off[mid] <= mt) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// The epilogue of one consumer warpgroup: its accumulators acc (rows row0 .. row0 + 63 of the grouped rows, the
// weight tile's 256 rows at output column n0) straight to y, rows at or past r_end and columns past n skipped.
// Fragment (j, q) of thread t (t < 128 in the warpgroup): row 16 (t / 32) + t % 32 / 4 + 8 (q / 2), weight row
// 8 j + 2 (t % 4) + q % 2 of the tile; for gate/up, j < 16 is W1's column n0 + 8 j + .. and j + 16 is W3's same
// column.
template <int P>
__device__ __forceinline__ void store_tile(const float (&acc)[32][4], const Args& a, int32_t row0, int32_t r_end,
                                           int64_t n0, int t) {
  const int lane = t % 32, warp = t / 32;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int32_t row = row0 + warp * 16 + lane / 4 + 8 * h;
    if (row >= r_end) continue;
#pragma unroll
    for (int j = 0; j < (P == 2 ? 16 : 32); ++j) {
      const int64_t col = n0 + 8 * j + 2 * (lane % 4);
      if (col >= a.n) continue;  // n even: the pair is whole
      if constexpr (P == 2) {
        const float v0 = glu_value(acc[j][2 * h], acc[j + 16][2 * h], a.situ, a.beta, a.lbeta);
        const float v1 = glu_value(acc[j][2 * h + 1], acc[j + 16][2 * h + 1], a.situ, a.beta, a.lbeta);
        *reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(a.y) + int64_t(row) * a.ldy + col) =
            __floats2bfloat162_rn(v0, v1);
      } else if (a.y_bf16) {
        *reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(a.y) + int64_t(row) * a.ldy + col) =
            __floats2bfloat162_rn(acc[j][2 * h], acc[j][2 * h + 1]);
      } else {
        *reinterpret_cast<float2*>(static_cast<float*>(a.y) + int64_t(row) * a.ldy + col) =
            make_float2(acc[j][2 * h], acc[j][2 * h + 1]);
      }
    }
  }
}

template <int P, bool kMx>
__global__ void __launch_bounds__(kThreads, 1) grouped_gemm_kernel(const __grid_constant__ Args a) {
  const int mt = int(blockIdx.y);
  if (mt >= a.tile_off[a.e_count]) return;
  const int e = expert_of_mtile(a.tile_off, a.e_count, mt);
  const int32_t r0 = a.offsets[e] + (mt - a.tile_off[e]) * kBM, r_end = a.offsets[e + 1];
  const int64_t n0 = int64_t(blockIdx.x) * kBN<P>;
  const ExpertPtr w0 = expert_ptr(a.proj[0], e), w1 = P == 2 ? expert_ptr(a.proj[1], e) : w0;
  const auto* wb0 = static_cast<const __nv_bfloat16*>(w0.w);
  const auto* wb1 = static_cast<const __nv_bfloat16*>(w1.w);

  extern __shared__ uint8_t smem_raw[];
  __nv_bfloat16* const sm =
      reinterpret_cast<__nv_bfloat16*>(smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023));
  const int tid = int(threadIdx.x);
  const int64_t k_tiles = (a.k + kBK - 1) / kBK;

  uint8_t* const staging = reinterpret_cast<uint8_t*>(sm + kStages * kStageElems);  // kMx: [kStages][kBW][32]
  uint32_t* const lut = reinterpret_cast<uint32_t*>(staging + kStages * kStagingBytes);  // kMx: [256]
  if constexpr (kMx) fill_mxfp4_lut(lut, tid);  // visible after the first k-step's barrier

  // k-tile kt -> stage st: A rows r0 .. r0 + 127 (zero past r_end), weight rows of the tile (zero past n): bf16, or
  // (kMx) their packed codes into the stage's staging tile.
  const auto load = [&](int st, int64_t kt) {
    __nv_bfloat16* sA = sm + st * kStageElems;
    __nv_bfloat16* sB = sA + kBM * kBK;
    const int64_t k0 = kt * kBK;
#pragma unroll
    for (int i = 0; i < kBM * kBK / 8 / kThreads; ++i) {
      const int idx = tid + i * kThreads, r = idx / 8, c = 8 * (idx % 8);
      const bool valid = r0 + r < r_end && k0 + c < a.k;
      const __nv_bfloat16* src = valid ? a.a + int64_t(r0 + r) * a.lda + k0 + c : a.a;
      cp_async16(sA + wgmma::sw128_off<kBM>(r, c), src, valid);
    }
    if constexpr (kMx) {
      uint8_t* sP = staging + st * kStagingBytes;
#pragma unroll
      for (int i = 0; i < kBW * 2 / kThreads; ++i) {  // two 16-byte pieces (32 codes each) per weight row
        const int idx = tid + i * kThreads, r = idx / 2, h = idx % 2;
        const bool second = P == 2 && r >= kBW / 2;
        const int64_t n = n0 + (P == 2 ? r % (kBW / 2) : r);
        const bool valid = n < a.n && k0 + 32 * h < a.k;
        const uint8_t* base = static_cast<const uint8_t*>(second ? w1.w : w0.w);
        const int64_t ld = second ? w1.ldw : w0.ldw;
        cp_async16(sP + r * 32 + 16 * h, valid ? base + n * ld + k0 / 2 + 16 * h : base, valid);
      }
    } else {
#pragma unroll
      for (int i = 0; i < kBW * kBK / 8 / kThreads; ++i) {
        const int idx = tid + i * kThreads, r = idx / 8, c = 8 * (idx % 8);
        const bool second = P == 2 && r >= kBW / 2;
        const int64_t n = n0 + (P == 2 ? r % (kBW / 2) : r);
        const bool valid = n < a.n && k0 + c < a.k;
        const __nv_bfloat16* base = second ? wb1 : wb0;
        const int64_t ld = second ? w1.ldw : w0.ldw;
        cp_async16(sB + wgmma::sw128_off<kBW>(r, c), valid ? base + n * ld + k0 + c : base, valid);
      }
    }
  };

  // kMx: thread t decodes weight row t of every k-tile; its two scales per k-tile come from global memory one
  // k-tile ahead (byte loads; rows past n and scales past k read nothing: their codes are zero-filled anyway).
  const bool t_second = P == 2 && tid >= kBW / 2;
  const int64_t t_n = n0 + (P == 2 ? tid % (kBW / 2) : tid);
  const uint8_t* const t_scale = kMx && t_n < a.n ? (t_second ? w1.scale : w0.scale) + t_n * (t_second ? w1.lds : w0.lds)
                                                 : nullptr;
  // The two scale bytes of k-tile kt (127 = 1.0 where there is none), decoded only at their use so that the loads
  // stay in flight.
  const auto scale_bytes = [&](int64_t kt) -> uint32_t {
    if (!t_scale || kt >= k_tiles) return 127u | (127u << 8);
    const int64_t j = kt * (kBK / 32);
    return uint32_t(t_scale[j]) | (kt * kBK + 32 < a.k ? uint32_t(t_scale[j + 1]) : 127u) << 8;
  };
  uint32_t sc = kMx ? scale_bytes(0) : 0u;

  float acc[32][4];  // D[64 rows of this warpgroup][the 256 weight rows of the tile]
#pragma unroll
  for (int j = 0; j < 32; ++j)
#pragma unroll
    for (int q = 0; q < 4; ++q) acc[j][q] = 0.f;

  // The warpgroup index as ptxas sees it warp-uniform (a broadcast), so no wgmma is serialized (C7520).
  const int wg = __shfl_sync(0xffffffffu, tid / 128, 0);

#pragma unroll
  for (int st = 0; st < kStages - 2; ++st) {
    if (st < k_tiles) load(st, st);
    cp_async_commit();
  }
  for (int64_t kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<kStages - 3>();  // this thread's pieces of k-tile kt have landed
    fence_proxy_async();           // ... and are visible to wgmma (the async proxy)
    __syncthreads();               // every thread's pieces; every wgmma of k-tile kt - 2 is done
    const int st = int(kt % kStages);
    const __nv_bfloat16* sA = sm + st * kStageElems;
    if constexpr (kMx) {
      const uint32_t next = scale_bytes(kt + 1);  // in flight during this decode and wgmma
      decode_mxfp4_row(staging + st * kStagingBytes, lut, sm + st * kStageElems + kBM * kBK, tid,
                       e8m0_pair(sc & 255u), e8m0_pair(sc >> 8));
      sc = next;
      fence_proxy_async();  // the decoded tile, visible to wgmma
      __syncthreads();
    }
    const uint64_t dA = wgmma::desc_sw128(sA + wg * 64 * kBK), dB = wgmma::desc_sw128(sA + kBM * kBK);
    wgmma::fence();
#pragma unroll
    for (int ks = 0; ks < kBK / 16; ++ks)  // a k-step of 16 is 32 bytes into the swizzle atom
      mma_m64n256k16(acc, wgmma::desc_add(dA, 32u * ks), wgmma::desc_add(dB, 32u * ks));
    wgmma::commit();
    const int64_t nk = kt + kStages - 2;
    if (nk < k_tiles) load(int(nk % kStages), nk);
    cp_async_commit();
    wgmma::wait<1>();
  }
  wgmma::wait<0>();
  wgmma::fence_operands(acc);
  cp_async_wait<0>();  // only empty groups can be pending; nothing may be in flight at exit

  store_tile<P>(acc, a, r0 + wg * 64, r_end, n0, tid % 128);
}

}  // namespace kimi::cuda::moe_gemm
