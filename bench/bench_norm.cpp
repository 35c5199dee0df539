// CPU norms at Kimi-Linear / K3 shapes.
#include <benchmark/benchmark.h>

#include "kimi/ops/norm.h"

namespace {

void BM_rms_norm(benchmark::State& st) {
  const int64_t rows = st.range(0), d = st.range(1);
  kimi::Tensor x(kimi::DType::bf16, {rows, d}), w(kimi::DType::bf16, {d}), y(kimi::DType::bf16, {rows, d});
  for (auto _ : st) kimi::rms_norm(x, w, 1e-5f, y);
  st.SetBytesProcessed(st.iterations() * rows * d * 4);
}
BENCHMARK(BM_rms_norm)->Args({2048, 2304})->Args({2048, 7168})->Unit(benchmark::kMicrosecond);

}  // namespace
