// bench/cuda/bench_util.h: shared pieces of the GPU benchmark programs: error checks, a device buffer
// filled from host bytes, seeded random bf16/f32 inputs.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "kimi/dtype.h"

#define CK(x)                                                        \
  do {                                                               \
    cudaError_t e_ = (x);                                            \
    if (e_ != cudaSuccess) {                                         \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                  \
    }                                                                \
  } while (0)

namespace kimi::bench {

inline constexpr double kCopyBytesPerS = 4.25e12;  // BENCH.md: H200 device-to-device copy, read + written

struct DevBuf {
  void* p = nullptr;
  DevBuf(size_t bytes, const std::vector<uint8_t>& init) {
    CK(cudaMalloc(&p, bytes ? bytes : 1));
    if (!init.empty()) CK(cudaMemcpy(p, init.data(), bytes, cudaMemcpyHostToDevice));
  }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

inline std::vector<uint8_t> random_bf16(size_t n, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<uint8_t> b(n * 2);
  for (size_t i = 0; i < n; ++i) {
    const uint16_t h = f32_to_bf16(d(rng));
    std::memcpy(&b[i * 2], &h, 2);
  }
  return b;
}

inline std::vector<uint8_t> random_f32(size_t n, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<uint8_t> b(n * 4);
  for (size_t i = 0; i < n; ++i) {
    const float f = d(rng);
    std::memcpy(&b[i * 4], &f, 4);
  }
  return b;
}

}  // namespace kimi::bench
