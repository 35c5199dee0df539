// Which tests a build registers: a test that can only run on a CUDA device exists only in a build with the CUDA
// backend. A build without it (KIMI_CUDA=OFF: CI, the release and asan presets) registers none of them, so that
// its test list holds only tests that run (a skipped test is a defect there, not a pass).
//   - GPU-only TEST / TEST_F / TEST_P bodies, and the helpers only they use, sit inside `#ifdef KIMI_WITH_CUDA`
//     (defined for every target linking kimi in a CUDA build; tests may test it, src/ never does).
//   - A parameterized suite over devices takes them from test_devices(): the CPU always, cuda:0 in a CUDA build.
//     A suite whose parameters are all GPU ones sits inside the #ifdef as a whole (no empty instantiation).
//   - The other way round, a test of what a build without the backend does sits inside `#ifndef KIMI_WITH_CUDA`.
// In a CUDA build on a machine without a visible device the GPU tests are registered and skip at run time
// (`if (cuda_device_count() == 0) GTEST_SKIP() << ...`): the GPU scripts (scripts/gpu/) run them where one is.
#pragma once

#include <vector>

#include "kimi/device.h"

namespace kimi::testutil {

// The devices a parameterized suite runs on: cpu, then cuda:0 in a build with the CUDA backend.
inline std::vector<Device> test_devices() {
#ifdef KIMI_WITH_CUDA
  return {Device::cpu(), Device::cuda(0)};
#else
  return {Device::cpu()};
#endif
}

}  // namespace kimi::testutil
