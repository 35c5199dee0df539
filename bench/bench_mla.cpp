// CPU MLA at Kimi-Linear's MLA shape (kv_lora 512, qk_rope 64, qk_nope 128, v 128) with the 32
// heads scaled to 8 to fit 2 cores; bf16 activations, weights and cache.
#include <benchmark/benchmark.h>

#include <random>

#include "kimi/ops/mla.h"

namespace {
using kimi::DType;
using kimi::Tensor;

constexpr int64_t H = 8, R = 512, P = 64, Dn = 128, Dv = 128;

Tensor rnd(DType dt, std::initializer_list<int64_t> shape, float lo, float hi, uint64_t seed) {
  Tensor t(dt, shape);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) kimi::store_from_f32(t.data(), dt, i, u(rng));
  return t;
}

Tensor ints(int64_t n, int64_t v) {
  Tensor t(DType::i32, {n});
  for (int64_t i = 0; i < n; ++i) t.data_as<int32_t>()[i] = int32_t(v);
  return t;
}

// Causal prefill of one sequence of T tokens (args: T, gate on/off).
void BM_mla_prefill(benchmark::State& st) {
  const int64_t T = st.range(0);
  const bool gated = st.range(1) != 0;
  Tensor q = rnd(DType::bf16, {1, T, H, Dn + P}, -2, 2, 1), lat = rnd(DType::bf16, {1, T, R}, -1.7f, 1.7f, 2);
  Tensor kpe = rnd(DType::bf16, {1, T, P}, -1.5f, 1.5f, 3), w = rnd(DType::bf16, {H * (Dn + Dv), R}, -0.07f, 0.07f, 4);
  Tensor gate = rnd(DType::bf16, {1, T, H * Dv}, -4, 4, 5), o(DType::bf16, {1, T, H, Dv});
  for (auto _ : st)
    kimi::mla_prefill(q, lat, kpe, kimi::Weight{w, {}}, gated ? gate.view() : kimi::TensorView{}, {}, std::nullopt, o);
  st.SetItemsProcessed(st.iterations() * T);  // tokens
}
BENCHMARK(BM_mla_prefill)->Args({1024, 0})->Args({1024, 1})->Unit(benchmark::kMillisecond);

// One decode step of N sequences, each attending to L cached tokens (args: N, L).
void BM_mla_decode(benchmark::State& st) {
  const int64_t N = st.range(0), L = st.range(1);
  Tensor q = rnd(DType::bf16, {N, H, Dn + P}, -2, 2, 6), cache = rnd(DType::bf16, {N, L, R + P}, -1.7f, 1.7f, 7);
  Tensor w = rnd(DType::bf16, {H * (Dn + Dv), R}, -0.07f, 0.07f, 8), o(DType::bf16, {N, H, Dv});
  Tensor lens = ints(N, L);
  for (auto _ : st) kimi::mla_decode(q, cache, lens, {}, kimi::Weight{w, {}}, {}, std::nullopt, o);
  st.SetBytesProcessed(st.iterations() * cache.numel() * 2);  // cache bytes read
}
BENCHMARK(BM_mla_decode)->Args({8, 4096})->Args({1, 4096})->Unit(benchmark::kMillisecond);

// Appending one decode token per sequence to the cache (args: N).
void BM_mla_cache_write(benchmark::State& st) {
  const int64_t N = st.range(0), L = 4096;
  Tensor lat = rnd(DType::bf16, {N, 1, R}, -1.7f, 1.7f, 9), kpe = rnd(DType::bf16, {N, 1, P}, -1.5f, 1.5f, 10);
  Tensor cache(DType::bf16, {N, L, R + P}), start = ints(N, L - 1);
  for (auto _ : st) kimi::mla_cache_write(lat, kpe, cache, start, {});
}
BENCHMARK(BM_mla_cache_write)->Arg(8)->Unit(benchmark::kMicrosecond);

}  // namespace
