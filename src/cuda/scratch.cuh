// src/cuda/scratch.cuh: stream-ordered device scratch for launchers, and the CUDA-graph capture guard.
//
// Scratch is allocated with cudaMallocAsync on the launch stream and freed with cudaFreeAsync on the same
// stream when the owner goes out of scope (also when the launcher throws), so it lives exactly until the
// kernels that use it have run. `upload` copies a host vector into fresh scratch (a pageable copy: the
// host vector may be freed as soon as it returns).
//
// The device's default memory pool (the one cudaMallocAsync draws from) is set once per device to keep what
// is freed (release threshold = max, like PyTorch's caching allocator: the pool holds its peak until trimmed);
// with CUDA's default threshold of 0 every allocation after a synchronization maps fresh memory (tens of us
// for a small table, milliseconds for gigabytes of scratch). Not while capturing: pool attributes may not be
// touched then (the next allocation outside capture does it). NOTE: the setting is process-wide: any other user
// of the device's default pool in the process (cudaMallocAsync without an explicit pool) keeps its freed
// memory cached too. The launchers make the stream's device current (DeviceGuard) before allocating.
//
// Launchers that upload host-built tables (offsets, slot rows, chunk tables) cannot run inside CUDA graph
// capture: pageable copies are not capturable and would invalidate the caller's capture. refuse_capture()
// is called first, before any CUDA call on the stream, and throws a kimi::Error that names the operator,
// leaving the caller's capture valid.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/check.cuh"

namespace kimi::cuda {

inline void keep_pool_cached(cudaStream_t s) {
  constexpr int kMaxDevices = 64;
  static std::atomic<bool> done[kMaxDevices];
  int dev = 0;
  KIMI_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev >= kMaxDevices || done[dev].load(std::memory_order_relaxed)) return;
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  KIMI_CUDA_CHECK(cudaStreamIsCapturing(s, &st));
  if (st != cudaStreamCaptureStatusNone) return;
  cudaMemPool_t pool;
  KIMI_CUDA_CHECK(cudaDeviceGetMemPool(&pool, dev));
  uint64_t keep = UINT64_MAX;
  KIMI_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  done[dev].store(true, std::memory_order_relaxed);
}

class Scratch {
 public:
  Scratch(size_t bytes, cudaStream_t s) : s_(s) {
    keep_pool_cached(s);
    KIMI_CUDA_CHECK(cudaMallocAsync(&p_, bytes ? bytes : 1, s));
  }
  ~Scratch() {
    if (p_) (void)cudaFreeAsync(p_, s_);  // NOTE: errors here would be sticky ones already reported
  }
  Scratch(Scratch&& o) noexcept : p_(o.p_), s_(o.s_) { o.p_ = nullptr; }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  Scratch& operator=(Scratch&&) = delete;
  template <class T = void>
  T* get() const { return static_cast<T*>(p_); }

 private:
  void* p_ = nullptr;
  cudaStream_t s_;
};

template <class T>
inline Scratch upload(const std::vector<T>& host, cudaStream_t s) {
  Scratch d(host.size() * sizeof(T), s);
  if (!host.empty()) KIMI_CUDA_CHECK(cudaMemcpyAsync(d.get(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice, s));
  return d;
}

inline void refuse_capture(cudaStream_t s, const char* op) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  KIMI_CUDA_CHECK(cudaStreamIsCapturing(s, &st));
  if (st != cudaStreamCaptureStatusNone)
    throw Error(std::string(op) +
                ": cannot run inside CUDA graph capture yet (its launcher uploads a host-built index table with a "
                "pageable copy); call it outside stream capture");
}

}  // namespace kimi::cuda
