// src/core/dispatch.h: sends a validated operator call to the backend of its device.
//
// Operators without a CUDA implementation say so by name; a build without CUDA says how to get it.
// Nothing silently falls back to another backend.
#pragma once

#include <utility>

#include "core/check.h"
#include "kimi/tensor.h"

namespace kimi {

// Runs cpu() for CPU tensors and cuda() for CUDA tensors.
template <class Cpu, class Cuda>
void dispatch([[maybe_unused]] const check::Checker& c, Device d, Cpu&& cpu, [[maybe_unused]] Cuda&& cuda) {
  if (d.type == DeviceType::cpu) return std::forward<Cpu>(cpu)();
#ifdef KIMI_WITH_CUDA
  return std::forward<Cuda>(cuda)();
#else
  c.fail("tensors are on " + to_string(d) +
         " but this build of kimi.cpp has no CUDA backend (configure with -DKIMI_CUDA=ON)");
#endif
}

// For operators the CUDA backend does not implement yet.
template <class Cpu>
void dispatch_cpu_only(const check::Checker& c, Device d, Cpu&& cpu) {
  if (d.type == DeviceType::cpu) return std::forward<Cpu>(cpu)();
  c.fail("not implemented on the " + to_string(d) + " backend yet (CPU tensors are supported)");
}

}  // namespace kimi
