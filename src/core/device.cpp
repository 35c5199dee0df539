// Implementation of kimi/device.h (CPU side; the CUDA side lives in src/cuda/runtime.cu).
#include "kimi/device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/check.h"
#include "core/registry.h"

#ifdef KIMI_WITH_CUDA
#include "cuda/runtime.h"
#endif

namespace kimi {

bool cuda_built() {
#ifdef KIMI_WITH_CUDA
  return true;
#else
  return false;
#endif
}

int cuda_device_count() {
#ifdef KIMI_WITH_CUDA
  return cuda::device_count();
#else
  return 0;
#endif
}

std::vector<Device> available_devices() {
  std::vector<Device> d{Device::cpu()};
  for (int i = 0; i < cuda_device_count(); ++i) d.push_back(Device::cuda(i));
  return d;
}

void* device_alloc(Device d, size_t bytes) {
  if (d.type == DeviceType::cpu) {
    void* p = std::aligned_alloc(64, ((bytes + 63) / 64) * 64 + 64);
    if (!p) throw std::bad_alloc();
    return p;
  }
#ifdef KIMI_WITH_CUDA
  return cuda::alloc(d, bytes);
#else
  throw Error("device_alloc: " + to_string(d) + " requested but this build has no CUDA backend");
#endif
}

void device_free(Device d, void* p) {
  if (d.type == DeviceType::cpu) return std::free(p);
#ifdef KIMI_WITH_CUDA
  cuda::free(d, p);
#endif
}

void device_zero(Device d, void* p, size_t bytes) {
  if (d.type == DeviceType::cpu) {
    std::memset(p, 0, bytes);
    return;
  }
#ifdef KIMI_WITH_CUDA
  cuda::zero_bytes(d, p, bytes);
#else
  throw Error("device_zero: " + to_string(d) + " requested but this build has no CUDA backend");
#endif
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
#ifdef KIMI_WITH_CUDA
  cuda::copy_bytes(dst.data, dst.device, src.data, src.device, bytes, ctx.cuda_stream);
#else
  (void)ctx;
  c.fail("a CUDA tensor was given but this build has no CUDA backend");
#endif
}

void synchronize(Device d, const Context& ctx) {
#ifdef KIMI_WITH_CUDA
  if (d.type == DeviceType::cuda) cuda::synchronize(d, ctx.cuda_stream);
#else
  (void)d;
  (void)ctx;
#endif
}

bool op_supported(std::string_view op, Device d) {
  for (const OpInfo& o : op_table())
    if (o.name == op) return d.type == DeviceType::cpu ? true : (cuda_built() && o.cuda);
  return false;
}

const std::vector<std::string>& all_ops() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const OpInfo& o : op_table()) v.emplace_back(o.name);
    return v;
  }();
  return names;
}

}  // namespace kimi
