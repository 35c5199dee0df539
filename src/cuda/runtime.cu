// Implementation of src/cuda/runtime.h.
#include <atomic>

#include "cuda/check.cuh"
#include "cuda/runtime.h"

namespace kimi::cuda {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: the backend is simply unavailable
    return 0;
  }
  return n;
}

int sm_count(int dev) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cache[kMaxDevices] = {};
  if (dev < 0 || dev >= kMaxDevices) {
    int sms = 0;
    KIMI_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    return sms;
  }
  int sms = cache[dev].load(std::memory_order_relaxed);
  if (sms <= 0) {
    KIMI_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    cache[dev].store(sms, std::memory_order_relaxed);
  }
  return sms;
}

void* alloc(Device d, size_t bytes) {
  const DeviceGuard device_guard(d.index);
  void* p = nullptr;
  KIMI_CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
  return p;
}

void free(Device d, void* p) {
  int prev = 0;
  const bool got = cudaGetDevice(&prev) == cudaSuccess;
  cudaSetDevice(d.index);  // no throw: called from destructors
  cudaFree(p);
  if (got) cudaSetDevice(prev);
}

void zero_bytes(Device d, void* p, size_t bytes) {
  const DeviceGuard device_guard(d.index);
  KIMI_CUDA_CHECK(cudaMemset(p, 0, bytes));
  // cudaMemset is asynchronous to the host on the legacy stream: wait, so that work on any stream (also a
  // non-blocking one) sees the zeros.
  KIMI_CUDA_CHECK(cudaStreamSynchronize(nullptr));
}

void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes, void* stream) {
  const bool dg = dst_dev.type == DeviceType::cuda, sg = src_dev.type == DeviceType::cuda;
  const cudaMemcpyKind kind = dg && sg ? cudaMemcpyDeviceToDevice
                              : dg     ? cudaMemcpyHostToDevice
                              : sg     ? cudaMemcpyDeviceToHost
                                       : cudaMemcpyHostToHost;
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  KIMI_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, s));
  KIMI_CUDA_CHECK(cudaStreamSynchronize(s));
}

void synchronize(Device d, void* stream) {
  const DeviceGuard device_guard(d.index);
  KIMI_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
}

void pool_stats(Device d, size_t* reserved, size_t* peak) {
  cudaMemPool_t pool;
  KIMI_CUDA_CHECK(cudaDeviceGetMemPool(&pool, d.index));
  uint64_t now = 0, high = 0;
  KIMI_CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &now));
  KIMI_CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &high));
  *reserved = size_t(now), *peak = size_t(high);
}

void reset_pool_peak(Device d) {
  const DeviceGuard device_guard(d.index);
  KIMI_CUDA_CHECK(cudaDeviceSynchronize());  // every stream-ordered free has happened: the pool holds no live scratch
  cudaMemPool_t pool;
  KIMI_CUDA_CHECK(cudaDeviceGetMemPool(&pool, d.index));
  KIMI_CUDA_CHECK(cudaMemPoolTrimTo(pool, 0));
  uint64_t zero = 0;  // setting the high-water mark to 0 resets it to what is reserved now
  KIMI_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &zero));
}

size_t available_bytes(Device d) {
  const DeviceGuard device_guard(d.index);
  size_t free = 0, total = 0;
  KIMI_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return free;
}

void* event_create(Device d) {
  const DeviceGuard device_guard(d.index);
  cudaEvent_t e = nullptr;
  KIMI_CUDA_CHECK(cudaEventCreate(&e));
  return e;
}

void event_destroy(Device d, void* event) {
  int prev = 0;
  const bool got = cudaGetDevice(&prev) == cudaSuccess;
  cudaSetDevice(d.index);  // no throw: called from destructors
  cudaEventDestroy(static_cast<cudaEvent_t>(event));
  if (got) cudaSetDevice(prev);
}

void event_record(Device d, void* event, void* stream) {
  const DeviceGuard device_guard(d.index);
  KIMI_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)));
}

float event_elapsed_ms(Device d, void* begin, void* end) {
  const DeviceGuard device_guard(d.index);
  KIMI_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(end)));
  float ms = 0;
  KIMI_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(begin), static_cast<cudaEvent_t>(end)));
  return ms;
}

void host_register(void* p, size_t bytes) {
  KIMI_CUDA_CHECK(cudaHostRegister(p, bytes, cudaHostRegisterPortable));
}

void host_unregister(void* p) { cudaHostUnregister(p); }

}  // namespace kimi::cuda
