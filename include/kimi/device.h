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

// Whether `op` (the function's name, e.g. "kda_chunk_fwd") has an implementation on d's backend.
bool op_supported(std::string_view op, Device d);
// Every operator name of the public API.
const std::vector<std::string>& all_ops();

}  // namespace kimi
