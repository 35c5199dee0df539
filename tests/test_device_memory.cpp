// The device memory counters of kimi/device.h: Tensor allocations per device, their peak, the reset.
// (On a GPU, with the memory pool: tests/test_random_model.cpp, OnTheGpuTheSameWeightsAsOnTheCpu.)
#include <gtest/gtest.h>

#include "expect_error.h"
#include "kimi/device.h"

namespace kimi {
namespace {

TEST(DeviceMemory, CountsTensorAllocationsAndPeaks) {
  const Device cpu = Device::cpu();
  reset_peak_memory(cpu);
  const DeviceMemoryStats s0 = device_memory_stats(cpu);
  EXPECT_EQ(s0.tensor_peak_bytes, s0.tensor_bytes);
  EXPECT_EQ(s0.pool_bytes, 0u);
  {
    Tensor a(DType::f32, {1000, 1000});  // 4,000,000 bytes + the allocator's 64-byte rounding and pad
    const DeviceMemoryStats s1 = device_memory_stats(cpu);
    EXPECT_EQ(s1.tensor_bytes, s0.tensor_bytes + 4000064);
    Tensor b(DType::u8, {100});
    EXPECT_EQ(device_memory_stats(cpu).tensor_bytes, s1.tensor_bytes + 192);
  }
  const DeviceMemoryStats s2 = device_memory_stats(cpu);
  EXPECT_EQ(s2.tensor_bytes, s0.tensor_bytes);
  EXPECT_EQ(s2.tensor_peak_bytes, s0.tensor_bytes + 4000064 + 192);
  EXPECT_EQ(s2.peak_bytes(), s2.tensor_peak_bytes);
  reset_peak_memory(cpu);
  EXPECT_EQ(device_memory_stats(cpu).tensor_peak_bytes, s0.tensor_bytes);
  // devices count apart
  const DeviceMemoryStats o0 = device_memory_stats(Device{DeviceType::cpu, 1});
  Tensor c(DType::f32, {16}, Device{DeviceType::cpu, 1});
  EXPECT_EQ(device_memory_stats(Device{DeviceType::cpu, 1}).tensor_bytes, o0.tensor_bytes + 128);
  EXPECT_EQ(device_memory_stats(cpu).tensor_bytes, s0.tensor_bytes);
}

TEST(DeviceMemory, AvailableBytesOfTheHost) {
  const size_t a = device_available_bytes(Device::cpu());
  EXPECT_GT(a, size_t(64) << 20);  // a machine that runs the tests has 64 MiB to spare
  EXPECT_EQ(device_available_bytes(Device{DeviceType::cpu, 1}) > 0, true);  // any host device: the same memory
}

}  // namespace
}  // namespace kimi

namespace kimi {
namespace {

TEST(DeviceMemory, PinnedHostChecksItsBufferAndCopiesStillWork) {
  // A host buffer pinned for its lifetime (page-locked where a GPU is present, a no-op otherwise): copies into it
  // are unchanged; a view that is absent or on a GPU is refused by name.
  Tensor src(DType::f32, {4, 3}), dst = Tensor::uninitialized(DType::f32, {4, 3});
  for (int i = 0; i < 12; ++i) src.data_as<float>()[i] = float(i) * 0.5f;
  {
    const PinnedHost pinned(dst.view());
    copy(dst.view(), src.view());
  }
  for (int i = 0; i < 12; ++i) EXPECT_EQ(dst.data_as<float>()[i], float(i) * 0.5f);
  EXPECT_KIMI_ERROR(PinnedHost p{TensorView{}}, "PinnedHost: argument 'host': expected a tensor, got none (null data)");
  TensorView gpu = src.view();
  gpu.device = Device{DeviceType::cuda, 0};
  EXPECT_KIMI_ERROR(PinnedHost p{gpu}, "PinnedHost: argument 'host': expected device cpu, got cuda:0");
}

}  // namespace
}  // namespace kimi
