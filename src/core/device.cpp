// Implementation of kimi/device.h: host memory here, every other backend's memory through its DeviceRuntime
// (src/core/registry.h, filled by the backend's register_ops: src/cuda/register.cu for CUDA).
#include "kimi/device.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <limits>
#include <string>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <tuple>
#include <unordered_map>

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

// The bytes device_alloc handed out, per device and per pointer (device_free is not told the size).
class AllocationCounter {
 public:
  void add(Device d, void* p, size_t bytes) {
    const std::lock_guard<std::mutex> lock(m_);
    sizes_[p] = bytes;
    Count& c = counts_[key(d)];
    c.now += bytes;
    c.peak = std::max(c.peak, c.now);
  }
  void remove(Device d, void* p) {
    const std::lock_guard<std::mutex> lock(m_);
    const auto it = sizes_.find(p);
    if (it == sizes_.end()) return;
    counts_[key(d)].now -= it->second;
    sizes_.erase(it);
  }
  std::pair<size_t, size_t> get(Device d) {
    const std::lock_guard<std::mutex> lock(m_);
    const Count& c = counts_[key(d)];
    return {c.now, c.peak};
  }
  void reset_peak(Device d) {
    const std::lock_guard<std::mutex> lock(m_);
    Count& c = counts_[key(d)];
    c.peak = c.now;
  }

 private:
  struct Count {
    size_t now = 0, peak = 0;
  };
  static int64_t key(Device d) { return int64_t(d.type) << 32 | uint32_t(d.index); }
  std::mutex m_;
  std::unordered_map<const void*, size_t> sizes_;  // pointers of every device are distinct while allocated
  std::map<int64_t, Count> counts_;
};

// Never destroyed: Tensors held by static objects are freed during exit, possibly after a function-local
// static counter would have been destroyed.
AllocationCounter& allocations() {
  static AllocationCounter* const c = new AllocationCounter;
  return *c;
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
    allocations().add(d, p, bytes);
    return p;
  }
  const DeviceRuntime* rt = runtime_of(d);
  if (!rt) throw Error("device_alloc: " + to_string(d) + " requested but this build has no CUDA backend");
  void* p = rt->alloc(d, bytes);
  allocations().add(d, p, bytes);
  return p;
}

void device_free(Device d, void* p) {
  if (!p) return;
  allocations().remove(d, p);
  if (d.type == DeviceType::cpu) return std::free(p);
  if (const DeviceRuntime* rt = runtime_of(d)) rt->free(d, p);
}

size_t device_available_bytes(Device d) {
  if (d.type == DeviceType::cpu) {
    std::ifstream in("/proc/meminfo");
    std::string line;
    while (std::getline(in, line)) {
      unsigned long long kb = 0;
      if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kb) == 1) return size_t(kb) * 1024;
    }
    const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);  // where /proc is not readable
    return pages > 0 && page > 0 ? size_t(pages) * size_t(page) : std::numeric_limits<size_t>::max();
  }
  const DeviceRuntime* rt = runtime_of(d);
  if (!rt) throw Error("device_available_bytes: " + to_string(d) + " requested but this build has no CUDA backend");
  return rt->available ? rt->available(d) : 0;
}

DeviceMemoryStats device_memory_stats(Device d) {
  DeviceMemoryStats s;
  std::tie(s.tensor_bytes, s.tensor_peak_bytes) = allocations().get(d);
  if (d.type != DeviceType::cpu)
    if (const DeviceRuntime* rt = runtime_of(d); rt && rt->pool_stats) rt->pool_stats(d, &s.pool_bytes, &s.pool_peak_bytes);
  return s;
}

void reset_peak_memory(Device d) {
  allocations().reset_peak(d);
  if (d.type != DeviceType::cpu)
    if (const DeviceRuntime* rt = runtime_of(d); rt && rt->reset_pool_peak) rt->reset_pool_peak(d);
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

PinnedHost::PinnedHost(TensorView host) {
  const check::Checker c("PinnedHost");
  c.present("host", host);
  c.device("host", host, Device::cpu());
  if (!cuda_built() || cuda_device_count() == 0) return;
  const DeviceRuntime& rt = registry().runtime(Backend::cuda);
  if (!rt.host_register) return;
  const size_t bytes = size_t(host.numel()) * host.element_size();
  if (bytes == 0) return;
  rt.host_register(host.data, bytes);
  data_ = host.data;
}

PinnedHost::~PinnedHost() {
  if (data_) registry().runtime(Backend::cuda).host_unregister(data_);
}

void synchronize(Device d, const Context& ctx) {
  if (d.type == DeviceType::cpu) return;
  if (const DeviceRuntime* rt = runtime_of(d)) rt->synchronize(d, ctx.cuda_stream);
}

}  // namespace kimi
