// src/cuda/kernel_attrs.cuh: kernel attributes set once per (kernel, device), so that the attribute calls stay off
// the per-call path (and out of CUDA-graph captures after the first eager call).
#pragma once

#include <atomic>
#include <cstdint>

#include "cuda/check.cuh"

namespace kimi::cuda {

// kKernel's dynamic shared-memory limit raised to `bytes` and its carveout to the most shared memory, on device
// `dev` (the current device), the first time it is asked for there. Devices >= 64 are set up on every call.
template <auto kKernel>
void allow_dynamic_smem(int dev, int bytes) {
  static std::atomic<uint64_t> ready{0};  // bit d: device d set up
  const uint64_t bit = dev < 64 ? uint64_t(1) << dev : 0;
  if (bit && (ready.load(std::memory_order_acquire) & bit)) return;
  KIMI_CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  const int carveout = int(cudaSharedmemCarveoutMaxShared);
  KIMI_CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributePreferredSharedMemoryCarveout, carveout));
  ready.fetch_or(bit, std::memory_order_acq_rel);
}

}  // namespace kimi::cuda
