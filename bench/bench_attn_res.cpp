// CPU Block Attention Residuals: Kimi-Linear hidden 2304 (a 512-token prefill chunk) and K3 hidden 7168,
// with K3's 9 candidates at the output (8 blocks + partial), bf16.
#include <benchmark/benchmark.h>

#include <vector>

#include "kimi/ops/attn_res.h"

namespace {

void BM_attn_res(benchmark::State& st) {
  const int64_t T = st.range(0), d = st.range(1), n = st.range(2);
  kimi::Tensor partial(kimi::DType::bf16, {T, d}), out(kimi::DType::bf16, {T, d});
  kimi::Tensor pw(kimi::DType::bf16, {d}), nw(kimi::DType::bf16, {d});
  std::vector<kimi::Tensor> blocks;
  for (int64_t i = 0; i < n; ++i) blocks.emplace_back(kimi::DType::bf16, std::initializer_list<int64_t>{T, d});
  std::vector<kimi::TensorView> views(blocks.begin(), blocks.end());
  for (auto _ : st) kimi::attn_res(partial, views, pw, nw, 1e-5f, out);
  st.SetBytesProcessed(st.iterations() * T * d * 2 * (n + 2));  // n + 1 candidates read, out written
}
BENCHMARK(BM_attn_res)->Args({512, 2304, 8})->Args({64, 7168, 8})->Unit(benchmark::kMillisecond);

}  // namespace
