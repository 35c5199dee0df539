// CUDA fill_random (kimi/ops/random.h): one thread per element over a grid-stride loop, element i from
// src/core/splitmix.h, the operations the CPU kernel runs (bit-identical fills). No host tables: capturable.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/splitmix.h"
#include "cuda/check.cuh"
#include "cuda/random/random.h"

namespace kimi::cuda {
namespace {

constexpr int kThreads = 256;

template <class T>
__global__ void fill_kernel(T* __restrict__ p, int64_t n, RandomFill r) {
  const int64_t stride = int64_t(gridDim.x) * kThreads;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    const uint64_t h = splitmix::element(r.state, uint64_t(i));
    if constexpr (std::is_same_v<T, float>) {
      p[i] = splitmix::uniform_f32(h, r.lo, r.width);
    } else if constexpr (std::is_same_v<T, uint16_t>) {
      p[i] = splitmix::bf16_bits(splitmix::uniform_f32(h, r.lo, r.width));
    } else {
      p[i] = T(splitmix::uniform_int(h, int64_t(r.lo), r.count));
    }
  }
}

template <class T>
void launch(TensorView t, const RandomFill& r, cudaStream_t s) {
  const int64_t n = t.numel();
  // Enough blocks to fill the GPU several times over; the grid-stride loop takes any size.
  const int64_t blocks = std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, int64_t(1) << 16);
  fill_kernel<T><<<unsigned(blocks), kThreads, 0, s>>>(static_cast<T*>(t.data), n, r);
  KIMI_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void fill_random(TensorView t, const RandomFill& r, const Context& ctx) {
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  const DeviceGuard device_guard(t.device.index);
  switch (t.dtype) {
    case DType::f32: return launch<float>(t, r, s);
    case DType::bf16: return launch<uint16_t>(t, r, s);
    case DType::u8: return launch<uint8_t>(t, r, s);
    case DType::i32: return launch<int32_t>(t, r, s);
    default: return;  // refused by validation (src/ops/random.cpp)
  }
}

}  // namespace kimi::cuda
