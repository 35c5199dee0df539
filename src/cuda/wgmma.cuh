// src/cuda/wgmma.cuh: Hopper warpgroup MMA (wgmma.mma_async, sm_90a) with both operands in shared memory, in the one
// layout this project uses: bf16 tiles with the 128-byte swizzle. Small device functions; the kernels that use them
// (src/cuda/kda/walk_rs.cuh) own the protocol.
//
// Layout (PTX ISA "Shared Memory Matrix Layout", 128B swizzling; T = 8 bf16 = 16 bytes):
//   A swizzle atom is 8 rows x 128 bytes (64 bf16), 1024-byte aligned; in row r (0 .. 7) of an atom, the 16-byte
//   chunk c lives at chunk c ^ r. A tile of R rows x C columns (C a multiple of 64) is stored atom-major,
//   [C / 64][R][64], so that rows are 128 bytes apart and 8-row groups 1024 bytes apart: sw128_off<R>(r, c).
//   K-major operand (A = [m][k] or B = [n][k], k contiguous): canonical ((8, m), (T, 2k)) : ((8T, SBO), (1, T)),
//     SBO = 1024 bytes, LBO unused (desc_sw128 sets 1024 for both operand kinds). A k-step of 16 inside an atom
//     advances the start address by 32 bytes (the swizzle acts on address bits 4-6 XOR 7-9, hence the 1024-byte
//     alignment); the next atom is R x 128 bytes on.
//   MN-major operand (imm-trans = 1: A = [k][m] or B = [k][n], m or n contiguous, 64 wide): canonical
//     ((T, 8, m), (8, k)) : ((1, T, LBO), (8T, SBO)): 8 k-rows of 128 bytes per atom, SBO = 1024 bytes to the next
//     8 k-rows, LBO to the next 64 columns (unused at width 64; 1024 as well). A k-step of 16 advances the start
//     address by 2048 bytes.
// Descriptor (64 bits): start address >> 4 in bits 0-13, LBO >> 4 in 16-29, SBO >> 4 in 32-45, base offset 0
// (atoms aligned), swizzle mode 1 (128B) in bits 62-63.
// Accumulator (m64nNk16, f32): thread t of the warpgroup holds d[j][e] = D[16 (t / 32) + t % 32 / 4 + 8 (e / 2)]
// [8 j + 2 (t % 4) + e % 2], j < N / 8: the mma.sync m16n8 fragment of warp t / 32, repeated over the n8 tiles.
// Protocol per batch: fence() (the accumulators were written by ordinary instructions), mma(), commit(), wait<0>(),
// then fence_operands() before the accumulators are read. Shared memory written by ordinary stores or cp.async is
// made visible to wgmma by fence_proxy_async() (bulk_copy.cuh) in the writing threads, before the barrier that
// orders the writes before the wgmma. Branches that choose a warpgroup's wgmma must be warp-uniform as ptxas sees
// them (e.g. on a __shfl_sync broadcast of the warpgroup index), or ptxas serializes every wgmma (warning C7520).
#pragma once

#include <cstdint>

#include "cuda/bulk_copy.cuh"

namespace kimi::cuda::wgmma {

// Element offset of (row r, column c) in an atom-major 128B-swizzled bf16 tile of R rows.
template <int R>
__device__ __forceinline__ int sw128_off(int r, int c) {
  return (c >> 6) * (R * 64) + r * 64 + ((((c & 63) >> 3) ^ (r & 7)) << 3) + (c & 7);
}

// Descriptor of a 128B-swizzled operand at p (shared memory; the start may be offset by k-steps, see above).
__device__ __forceinline__ uint64_t desc_sw128(const void* p) {
  constexpr uint64_t kLbo = 1024 >> 4, kSbo = 1024 >> 4;
  return uint64_t((smem_u32(p) & 0x3FFFFu) >> 4) | (kLbo << 16) | (kSbo << 32) | (uint64_t(1) << 62);
}
// The same descriptor with the start moved by `bytes` (a multiple of 16; no carry out of the 14-bit field for
// addresses inside the 228 KB of shared memory).
__device__ __forceinline__ uint64_t desc_add(uint64_t d, uint32_t bytes) {
  return d + (bytes >> 4);
}

__device__ __forceinline__ void fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Pins the accumulators: the compiler may not move their reads or writes across this point (after wait<>()).
template <int NT>
__device__ __forceinline__ void fence_operands(float (&d)[NT][4]) {
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[j][e])::"memory");
}

// Register budget per thread of the calling warpgroup (setmaxnreg, sm_90a; N a multiple of 8 in 24 .. 256): every
// thread of the warpgroup executes it. Takes effect only under a register cap at entry (__launch_bounds__(threads,
// 1)) with each warpgroup's role one branch of a single if/else; ptxas warns (C7508) where it ignores it.
template <int N>
__device__ __forceinline__ void regs_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void regs_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

// D[64][N] += A[64][16] B[16][N] (bf16, fp32 accumulate); a, b: descriptors; kTransA / kTransB: MN-major
// operand.
template <int kTransA, int kTransB>
__device__ __forceinline__ void mma_m64n32k16(float (&d)[4][4], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, "
      "%16, %17, p, 1, 1, %19, %20;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
        "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
        "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3])
      : "l"(a), "l"(b), "r"(1), "n"(kTransA), "n"(kTransB)
      : "memory");
}

template <int kTransA, int kTransB>
__device__ __forceinline__ void mma_m64n64k16(float (&d)[8][4], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "
      "%32, %33, p, 1, 1, %35, %36;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
        "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
        "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),
        "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
        "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
        "+f"(d[7][2]), "+f"(d[7][3])
      : "l"(a), "l"(b), "r"(1), "n"(kTransA), "n"(kTransB)
      : "memory");
}

template <int N, int kTransA, int kTransB>
__device__ __forceinline__ void mma(float (&d)[N / 8][4], uint64_t a, uint64_t b) {
  static_assert(N == 32 || N == 64, "instantiated widths");
  if constexpr (N == 32)
    mma_m64n32k16<kTransA, kTransB>(d, a, b);
  else
    mma_m64n64k16<kTransA, kTransB>(d, a, b);
}

// Register-A forms (RS): D[64][N] += A[64][16] B[16][N] with A in registers and B a K-major descriptor. A is the
// accumulator fragment of an earlier product packed to bf16 pairs (a_frag below): a[0] = (row gq, columns 2 tq,
// + 1), a[1] = (row gq + 8, the same columns), a[2], a[3] = the same rows at columns + 8, in each warp's 16 rows, so
// that an accumulator [64][16 k + 16) is the A operand of k-step k of the next product without shared memory. The
// registers are read while the wgmma runs: the caller keeps them unchanged, and alive (fence_operands after the
// wait), until the wgmma group that reads them has completed.
template <int kTransB = 0>
__device__ __forceinline__ void mma_rs_m64n64k16(float (&d)[8][4], const uint32_t (&a)[4], uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "
      "{%32,%33,%34,%35}, %36, p, 1, 1, %38;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
        "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
        "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),
        "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
        "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
        "+f"(d[7][2]), "+f"(d[7][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1), "n"(kTransB)
      : "memory");
}

__device__ __forceinline__ void mma_rs_m64n128k16(float (&d)[16][4], const uint32_t (&a)[4], uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
      "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
      "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "
      "{%64,%65,%66,%67}, %68, p, 1, 1, 0;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
        "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
        "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),
        "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
        "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
        "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]),
        "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]),
        "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]),
        "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]),
        "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]),
        "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1)
      : "memory");
}

// kTransB = 1: B MN-major (imm-trans-b; m64n64 only), as the SS forms take it.
template <int N, int kTransB = 0>
__device__ __forceinline__ void mma_rs(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t b) {
  static_assert(N == 64 || N == 128, "instantiated widths");
  static_assert(N == 64 || kTransB == 0, "MN-major B only at width 64");
  if constexpr (N == 64)
    mma_rs_m64n64k16<kTransB>(d, a, b);
  else
    mma_rs_m64n128k16(d, a, b);
}

// Pins A fragments held in registers (see mma_rs): their values must survive to this point.
template <int NK>
__device__ __forceinline__ void fence_operands(uint32_t (&a)[NK][4]) {
#pragma unroll
  for (int k = 0; k < NK; ++k)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(a[k][e])::"memory");
}

}  // namespace kimi::cuda::wgmma
