// GPU benchmark: kimi::sample_tokens on CUDA logits [N, 163840] f32 (Kimi's vocabulary) at N = 1, 32, 128: greedy,
// top_k = 50 (T = 1), top_p = 0.9 (T = 1) and both; CUDA events, median of 30 calls after 5 warm-ups. Logits
// uniform in [-9, 9], the same parameters every call (the kernel's work does not depend on the draw). Prints ms per
// call and N * V * 4 bytes over that time (the kernel reads the row 1 (greedy), 6 (top-k), 6 (top-p) or 10 (both)
// times) beside the time a host copy of the same logits takes (cudaMemcpy into pinned memory): the copy this
// operator removes from generate()'s step.
#include <cuda_runtime.h>

#include <cstdio>
#include <random>
#include <vector>

#include "bench_util.h"
#include "kimi/device.h"
#include "kimi/ops/sample.h"

namespace {

using kimi::DType;
using kimi::Device;
using kimi::Tensor;

constexpr int64_t kVocab = 163840;

Tensor filled(DType dt, int64_t n, double value) {
  Tensor h(dt, {n});
  for (int64_t i = 0; i < n; ++i) {
    if (dt == DType::f32) h.data_as<float>()[i] = float(value);
    else if (dt == DType::i32) h.data_as<int32_t>()[i] = int32_t(value);
    else h.data_as<int64_t>()[i] = int64_t(value) + i;
  }
  Tensor d = Tensor::uninitialized(dt, {n}, Device::cuda(0));
  kimi::copy(d, h);
  return d;
}

void run(int64_t N, const char* name, float T, int top_k, float top_p) {
  std::mt19937 rng{uint32_t(N)};
  const std::vector<uint8_t> bytes = kimi::bench::random_f32(size_t(N * kVocab), rng, -9.f, 9.f);
  Tensor logits = Tensor::uninitialized(DType::f32, {N, kVocab}, Device::cuda(0));
  CK(cudaMemcpy(logits.data(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  const Tensor t = filled(DType::f32, N, T), k = filled(DType::i32, N, top_k), p = filled(DType::f32, N, top_p);
  const Tensor seed = filled(DType::i64, N, 42), seq = filled(DType::i64, N, 0), step = filled(DType::i64, N, 7);
  Tensor out = Tensor::uninitialized(DType::i32, {N}, Device::cuda(0));
  const kimi::SampleParams params{t, k, p, seed, seq, step};
  const double ms = kimi::bench::median_ms([&] { kimi::sample_tokens(logits, params, out); }, 5, 30);
  std::vector<float> host(size_t(N * kVocab));
  const kimi::PinnedHost pinned(kimi::TensorView(host.data(), DType::f32, {N, kVocab}));
  const double copy_ms = kimi::bench::median_ms(
      [&] { CK(cudaMemcpy(host.data(), logits.data(), host.size() * 4, cudaMemcpyDeviceToHost)); }, 2, 10);
  std::printf("sample_tokens  N %4lld  V %lld  %-14s  %8.4f ms  %7.1f GB/s of logits  (host copy of the logits: %7.3f ms)\n",
              (long long)N, (long long)kVocab, name, ms, double(N * kVocab * 4) / (ms * 1e-3) / 1e9, copy_ms);
}

}  // namespace

int main() {
  for (int64_t N : {1, 32, 128}) {
    run(N, "greedy", 0.f, 0, 1.f);
    run(N, "top_k 50", 1.f, 50, 1.f);
    run(N, "top_p 0.9", 1.f, 0, 0.9f);
    run(N, "top_k 50 p 0.9", 1.f, 50, 0.9f);
  }
  return 0;
}
