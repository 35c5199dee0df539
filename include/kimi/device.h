// kimi/device.h: backends, device memory and copies.
//
// The CPU backend is always present. The CUDA backend is present when kimi.cpp was configured with
// KIMI_CUDA=ON and a CUDA device is visible at run time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kimi/context.h"
#include "kimi/tensor.h"

namespace kimi {

bool cuda_built();           // compiled with the CUDA backend
int cuda_device_count();     // 0 without the backend or without a device
std::vector<Device> available_devices();  // cpu, then each CUDA device

// Raw device memory (host memory for Device::cpu, 64-byte aligned).
void* device_alloc(Device d, size_t bytes);
void device_free(Device d, void* p);
// How many device_alloc calls this process has made, on every device (every Tensor allocation is one).
// A diagnostic: tests use it to check that a planned model step allocates nothing.
uint64_t device_alloc_count();
// bytes at p <- 0 (synchronous).
void device_zero(Device d, void* p, size_t bytes);

// dst <- src: same shape and dtype, both contiguous, any pair of devices. Synchronous.
void copy(TensorView dst, TensorView src, const Context& ctx = {});
void synchronize(Device d, const Context& ctx = {});

// Page-locks a host buffer for its lifetime (cudaHostRegister with every linked GPU backend), so that device copies
// into or out of it run at the link's rate instead of through the driver's pageable staging (measured on the H200
// host: 84 MB of batch-128 logits in ~5.7 ms pageable). A no-op on a build or machine without a GPU. A kimi::Error
// when the host view is absent, not on the host, or the registration fails (e.g. already registered).
class PinnedHost {
 public:
  explicit PinnedHost(TensorView host);
  ~PinnedHost();
  PinnedHost(const PinnedHost&) = delete;
  PinnedHost& operator=(const PinnedHost&) = delete;

 private:
  void* data_ = nullptr;
};

// Bytes that can still be allocated on d: for a host device the kernel's estimate of what can be allocated
// without swapping (MemAvailable of /proc/meminfo), for a GPU cudaMemGetInfo's free bytes.
size_t device_available_bytes(Device d);

// Memory kimi.cpp holds on a device.
//   tensor_*: what device_alloc handed out and device_free has not taken back (every Tensor: weights, caches,
//     activations) on that device, counted since the process started (host memory for cpu devices; the
//     mapped checkpoint files are not allocations and do not count);
//   pool_*: CUDA only (0 on the host): the device's default memory pool, where the CUDA kernels' stream-ordered
//     scratch comes from (cudaMallocAsync): bytes reserved now and its high-water mark
//     (cudaMemPoolAttrReservedMemCurrent / High). The pool keeps what is freed, so it holds its peak.
// Not counted: cuBLAS workspaces and the CUDA context.
struct DeviceMemoryStats {
  size_t tensor_bytes = 0, tensor_peak_bytes = 0;
  size_t pool_bytes = 0, pool_peak_bytes = 0;
  // The peak of both: an upper bound of the most held at once (the two peaks may come at different times).
  size_t peak_bytes() const { return tensor_peak_bytes + pool_peak_bytes; }
};
DeviceMemoryStats device_memory_stats(Device d);
// Starts new peaks on d: tensor_peak_bytes = tensor_bytes; on a GPU it waits for the device, releases what
// the pool holds unused (cudaMemPoolTrimTo 0) and resets the pool's high-water mark, so that the next
// peaks are those of the work that follows (whose first pool allocations then map memory afresh).
void reset_peak_memory(Device d);

// Whether `op` (the function's name, e.g. "kda_chunk_fwd") has an implementation on d's backend.
bool op_supported(std::string_view op, Device d);
// Every operator name of the public API.
const std::vector<std::string>& all_ops();

}  // namespace kimi
