// CPU MXFP4 dequant / quant of a Kimi-Linear expert matrix [1024, 2304] (bf16 side).
//   ./build/release/bench/kimi_bench --benchmark_filter=mxfp4
#include <benchmark/benchmark.h>

#include <random>

#include "kimi/ops/mxfp4.h"

namespace {

using kimi::DType;
using kimi::Tensor;

void BM_mxfp4_dequant(benchmark::State& st) {
  const int64_t o = st.range(0), i = st.range(1);
  Tensor p(DType::u8, {o, i / 2}), s(DType::u8, {o, i / 32}), w(DType::bf16, {o, i});
  std::mt19937 rng(1);
  for (int64_t j = 0; j < o * i / 2; ++j) p.data_as<uint8_t>()[j] = uint8_t(rng());
  for (int64_t j = 0; j < o * i / 32; ++j) s.data_as<uint8_t>()[j] = uint8_t(118 + rng() % 7);
  for (auto _ : st) kimi::mxfp4_dequant(p, s, w);
  st.SetItemsProcessed(st.iterations() * o * i);
}
BENCHMARK(BM_mxfp4_dequant)->Args({1024, 2304})->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_mxfp4_quant(benchmark::State& st) {
  const int64_t o = st.range(0), i = st.range(1);
  Tensor p(DType::u8, {o, i / 2}), s(DType::u8, {o, i / 32}), w(DType::bf16, {o, i});
  std::mt19937 rng(1);
  for (int64_t j = 0; j < o * i; ++j) w.data_as<uint16_t>()[j] = uint16_t(0x3800 + rng() % 0x1000 + (j % 2) * 0x8000);
  for (auto _ : st) kimi::mxfp4_quant(w, p, s);
  st.SetItemsProcessed(st.iterations() * o * i);
}
BENCHMARK(BM_mxfp4_quant)->Args({1024, 2304})->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
