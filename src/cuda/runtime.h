// src/cuda/runtime.h: the CUDA backend's memory, copies and error checks (host-side API, no CUDA
// headers so that .cpp files can include it).
#pragma once

#include <cstddef>

#include "kimi/tensor.h"

namespace kimi::cuda {

int device_count();
// Multiprocessor count of CUDA device dev, queried once per device (the attribute query stays off per-call paths).
int sm_count(int dev);
void* alloc(Device d, size_t bytes);
void free(Device d, void* p);
void zero_bytes(Device d, void* p, size_t bytes);  // synchronous
void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes, void* stream);
void synchronize(Device d, void* stream);
// The device's default memory pool (cudaMallocAsync scratch): reserved bytes now and the high-water mark.
void pool_stats(Device d, size_t* reserved, size_t* peak);
// Waits for the device, releases the pool's unused memory and resets its high-water mark.
void reset_pool_peak(Device d);
size_t available_bytes(Device d);  // cudaMemGetInfo's free bytes
// Timing events (DeviceRuntime's event_*; cudaEvent_t as void*).
void* event_create(Device d);
void event_destroy(Device d, void* event);  // no throw
void event_record(Device d, void* event, void* stream);
float event_elapsed_ms(Device d, void* begin, void* end);  // waits for `end`
void host_register(void* p, size_t bytes);  // cudaHostRegister (portable: every device sees it pinned)
void host_unregister(void* p);              // no throw

}  // namespace kimi::cuda
