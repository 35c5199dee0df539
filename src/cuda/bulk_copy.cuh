// src/cuda/bulk_copy.cuh: the Hopper bulk copy engine (cp.async.bulk, and its tensor-map form for 2-4-d tiles) and the
// shared-memory mbarrier that tracks its global -> shared copies, as small device functions (sm_90).
//
// Protocol of a global -> shared load tracked by one mbarrier (phase u = its u-th use, from 0):
//   one thread:   mbar_init(bar, 1); mbar_init_fence()   (once; other threads use bar after a barrier)
//   per use u:    one thread: mbar_expect_tx(bar, total bytes of the use)   (the phase's one arrival)
//                 then (that thread, or any thread ordered after it): bulk_g2s(dst, src, bytes, bar) or
//                 tma_load_4d per piece; each piece completes its bytes of the transaction
//   readers:      mbar_wait(bar, u & 1), then read dst (ordinary shared loads, or wgmma).
// The phase completes when the one arrival has happened and every expected byte has landed, so expect_tx is
// posted before any piece is issued; use u + 1 may be posted only once every reader has passed its wait on use u
// (a parity wait cannot tell phase u from u + 2). Pieces: `bytes` a multiple of 16, both addresses 16-byte
// aligned.
// Shared -> global: the writer threads fence their shared stores for the async proxy (fence_proxy_async), a barrier
// orders them before the issuing thread's bulk_s2g copies, bulk_commit groups them, and the issuing thread calls
// bulk_wait_read before the shared source may be reused or the CTA exits (the global writes complete with the
// grid, before any later kernel in the stream).
#pragma once

#include <cstdint>

namespace kimi::cuda {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(arrivals) : "memory");
}
// Makes the init visible to the async proxy (the bulk copies' complete_tx); other threads may use the mbarrier
// only after a barrier (or the like) that orders the init before them.
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// One arrival that also expects `bytes` more bytes of transaction in the current phase.
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
// One arrival (release: the thread's earlier memory accesses happen before the phase completes, for a thread that
// waits on it): a barrier between thread groups, e.g. "this buffer is full / has been read".
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}
// Spins until the phase with the given parity has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  const uint32_t b = smem_u32(bar);
  uint32_t done = 0;
  while (!done)
    asm volatile(
        "{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(b), "r"(parity)
        : "memory");
}

// Global -> shared, `bytes` (multiple of 16; both addresses 16-byte aligned), completing on `bar`.
__device__ __forceinline__ void bulk_g2s(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               ::"r"(smem_u32(dst)), "l"(src), "r"(bytes), "r"(smem_u32(bar))
               : "memory");
}
// Global -> shared through a tensor map (cp.async.bulk.tensor, tile mode, 4 dimensions; `map` a CUtensorMap in
// global, constant or __grid_constant__ parameter memory): the box at coordinates (c0 = innermost, .. c3) lands
// densely, in box order, at dst (128-byte aligned), completing the box's bytes on `bar`; elements outside the
// tensor are zero-filled and counted among the bytes.
__device__ __forceinline__ void tma_load_4d(void* dst, const void* map, int c0, int c1, int c2, int c3,
                                            uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];" ::"r"(smem_u32(dst)), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_u32(bar))
      : "memory");
}
// The 2-d and 3-d forms of tma_load_4d (the same rules): c0 innermost.
__device__ __forceinline__ void tma_load_2d(void* dst, const void* map, int c0, int c1, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
      ::"r"(smem_u32(dst)), "l"(map), "r"(c0), "r"(c1), "r"(smem_u32(bar))
      : "memory");
}
__device__ __forceinline__ void tma_load_3d(void* dst, const void* map, int c0, int c1, int c2, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];" ::"r"(smem_u32(dst)), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(bar))
      : "memory");
}
// Fetches a tensor map (generic address of a __grid_constant__ parameter, or global) into the copy engine's
// descriptor cache ahead of its first use.
__device__ __forceinline__ void tma_prefetch_map(const void* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(map) : "memory");
}
// Generic-proxy writes to shared memory (st.shared, cp.async) made visible to the async proxy (a bulk_s2g source,
// wgmma operands): every writer thread, after its last such store, before the barrier that orders the reader.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// Shared -> global, `bytes` (multiple of 16; 16-byte aligned), in the issuing thread's current bulk group.
__device__ __forceinline__ void bulk_s2g(void* dst, const void* src, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(smem_u32(src)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// The issuing thread: every committed bulk_s2g has read its shared source.
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }

}  // namespace kimi::cuda
