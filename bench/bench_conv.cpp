// CPU short convolution at Kimi-Linear shapes: q/k/v conv of 32 heads x 128 = 4096 channels, W = 4,
// bf16 activations and cache, fp32 checkpoint weight [C, 1, 4].
#include <benchmark/benchmark.h>

#include "kimi/ops/conv.h"

namespace {

void BM_short_conv_fwd(benchmark::State& st) {
  const int64_t T = st.range(0), C = st.range(1);
  kimi::Tensor x(kimi::DType::bf16, {1, T, C}), y(kimi::DType::bf16, {1, T, C}), w(kimi::DType::f32, {C, 1, 4});
  kimi::Tensor cache(kimi::DType::bf16, {1, C, 3});
  for (auto _ : st) kimi::short_conv_fwd(x, w, cache, cache, {}, {}, kimi::ConvActivation(st.range(2)), y);
  st.SetBytesProcessed(st.iterations() * T * C * 4);  // read x + write y (bf16)
}
BENCHMARK(BM_short_conv_fwd)->Args({4096, 4096, 1})->Args({4096, 4096, 0})->Unit(benchmark::kMillisecond);

void BM_short_conv_update(benchmark::State& st) {
  const int64_t N = st.range(0), C = st.range(1);
  kimi::Tensor x(kimi::DType::bf16, {N, C}), y(kimi::DType::bf16, {N, C}), w(kimi::DType::f32, {C, 1, 4});
  kimi::Tensor cache(kimi::DType::bf16, {N, C, 3});
  for (auto _ : st) kimi::short_conv_update(x, w, cache, {}, kimi::ConvActivation::silu, y);
  st.SetBytesProcessed(st.iterations() * N * C * (4 + 12));  // x, y and the cache read + written
}
BENCHMARK(BM_short_conv_update)->Args({64, 4096})->Unit(benchmark::kMicrosecond);

}  // namespace
