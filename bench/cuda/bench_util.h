// bench/cuda/bench_util.h: shared pieces of the GPU benchmark programs: error checks, a device buffer
// filled from host bytes, seeded random bf16/f32 inputs.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
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

// Mean ms per call of `calls` calls queued back to back between two events (the host's launch overhead hidden
// behind the device's work, as in a model's step), median over `reps` such runs after `warmup` calls.
template <class F>
double streamed_ms(F&& fn, int warmup, int reps, int calls, cudaStream_t stream = nullptr) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < warmup; ++i) fn();
  CK(cudaDeviceSynchronize());
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(e0, stream));
    for (int c = 0; c < calls; ++c) fn();
    CK(cudaEventRecord(e1, stream));
    CK(cudaEventSynchronize(e1));
    float t;
    CK(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t / float(calls));
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Like streamed_ms, but the calls are queued behind a host gate (cudaLaunchHostFunc sleeping kGateMs) so the device
// runs them back to back whatever the host's launch rate: the time of the device's work alone, as a CUDA graph
// replays a decode step (src/model/decode_graph.h). Exits with an error when the host needed longer than the gate to
// queue the calls (the time would include host overhead).
inline constexpr int kGateMs = 10;

template <class F>
double queued_ms(F&& fn, int warmup, int reps, int calls, cudaStream_t stream = nullptr) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < warmup; ++i) fn();
  CK(cudaDeviceSynchronize());
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) {
    CK(cudaLaunchHostFunc(
        stream, [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(kGateMs)); }, nullptr));
    const auto t0 = std::chrono::steady_clock::now();
    CK(cudaEventRecord(e0, stream));
    for (int c = 0; c < calls; ++c) fn();
    CK(cudaEventRecord(e1, stream));
    const double host_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (host_ms >= 0.8 * kGateMs) {
      std::fprintf(stderr, "queued_ms: queuing %d calls took %.2f ms on the host, the gate is %d ms\n", calls, host_ms,
                   kGateMs);
      std::exit(1);
    }
    CK(cudaEventSynchronize(e1));
    float t;
    CK(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t / float(calls));
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Median time in ms of `reps` calls of fn (CUDA events recorded on `stream` around each call: the legacy stream
// by default), after `warmup` untimed calls.
template <class F>
double median_ms(F&& fn, int warmup, int reps, cudaStream_t stream = nullptr) {
  return streamed_ms(fn, warmup, reps, 1, stream);
}

}  // namespace kimi::bench
