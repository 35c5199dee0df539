// Implementation of kimi/device.h: host memory here, every other backend's memory through its DeviceRuntime
// (src/core/registry.h, filled by the backend's register_ops: src/cuda/register.cu for CUDA).
#include "kimi/device.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/check.h"
#include "core/registry.h"

namespace kimi {

namespace {
std::atomic<uint64_t> g_alloc_count{0};

// The runtime of d's backend, or nullptr when this build does not link that backend.
const DeviceRuntime* runtime_of(Device d) {
  const Backend b = backend_of(d);
  return registry().linked(b) ? &registry().runtime(b) : nullptr;
}
}  // namespace

bool cuda_built() { return registry().linked(Backend::cuda); }

int cuda_device_count() {
  const DeviceRuntime* rt = runtime_of(Device::cuda());
  return rt ? rt->device_count() : 0;
}

std::vector<Device> available_devices() {
  std::vector<Device> d{Device::cpu()};
  for (int i = 0; i < cuda_device_count(); ++i) d.push_back(Device::cuda(i));
  return d;
}

uint64_t device_alloc_count() { return g_alloc_count.load(std::memory_order_relaxed); }

void* device_alloc(Device d, size_t bytes) {
  g_alloc_count.fetch_add(1, std::memory_order_relaxed);
  if (d.type == DeviceType::cpu) {
    void* p = std::aligned_alloc(64, ((bytes + 63) / 64) * 64 + 64);
    if (!p) throw std::bad_alloc();
    return p;
  }
  const DeviceRuntime* rt = runtime_of(d);
  if (!rt) throw Error("device_alloc: " + to_string(d) + " requested but this build has no CUDA backend");
  return rt->alloc(d, bytes);
}

void device_free(Device d, void* p) {
  if (d.type == DeviceType::cpu) return std::free(p);
  if (const DeviceRuntime* rt = runtime_of(d)) rt->free(d, p);
}

void device_zero(Device d, void* p, size_t bytes) {
  if (d.type == DeviceType::cpu) {
    std::memset(p, 0, bytes);
    return;
  }
  const DeviceRuntime* rt = runtime_of(d);
  if (!rt) throw Error("device_zero: " + to_string(d) + " requested but this build has no CUDA backend");
  rt->zero(d, p, bytes);
}

void copy(TensorView dst, TensorView src, const Context& ctx) {
  check::Checker c("copy");
  c.present("dst", dst);
  c.present("src", src);
  if (dst.dtype != src.dtype) c.fail("dst", "dtype " + std::string(dtype_name(src.dtype)) + " (like src)", std::string(dtype_name(dst.dtype)));
  c.shape("dst", dst, std::vector<int64_t>(src.shape.begin(), src.shape.begin() + src.ndim));
  c.contiguous("dst", dst);
  c.contiguous("src", src);
  const size_t bytes = size_t(src.numel()) * src.element_size();
  if (dst.device.type == DeviceType::cpu && src.device.type == DeviceType::cpu) {
    std::memmove(dst.data, src.data, bytes);
    return;
  }
  // the device side's runtime copies (either side may be the host)
  const DeviceRuntime* rt = runtime_of(dst.device.type == DeviceType::cpu ? src.device : dst.device);
  if (!rt) c.fail("a CUDA tensor was given but this build has no CUDA backend");
  rt->copy(dst.data, dst.device, src.data, src.device, bytes, ctx.cuda_stream);
}

void synchronize(Device d, const Context& ctx) {
  if (d.type == DeviceType::cpu) return;
  if (const DeviceRuntime* rt = runtime_of(d)) rt->synchronize(d, ctx.cuda_stream);
}

}  // namespace kimi
