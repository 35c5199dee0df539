// src/cuda/check.cuh: CUDA error checking for launchers.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "kimi/error.h"

#define KIMI_CUDA_CHECK(expr)                                                                      \
  do {                                                                                             \
    const cudaError_t err_ = (expr);                                                               \
    if (err_ != cudaSuccess)                                                                       \
      throw ::kimi::Error(std::string("CUDA error: ") + cudaGetErrorString(err_) + " in " #expr " at " \
                          __FILE__ ":" + std::to_string(__LINE__));                                \
  } while (0)

namespace kimi::cuda {

// Makes device `index` current for the enclosing scope and gives the caller's device back on exit: launchers
// run on the caller's thread, and a framework's current device (PyTorch's) must not change under it.
class DeviceGuard {
 public:
  explicit DeviceGuard(int index) {
    KIMI_CUDA_CHECK(cudaGetDevice(&prev_));
    if (prev_ != index) {
      KIMI_CUDA_CHECK(cudaSetDevice(index));
      changed_ = true;
    }
  }
  ~DeviceGuard() {
    if (changed_) (void)cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = 0;
  bool changed_ = false;
};

}  // namespace kimi::cuda
