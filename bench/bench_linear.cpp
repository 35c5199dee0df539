// CPU linear at Kimi-Linear shapes (d = 2304): decode (M = 1) and prefill (M = 256) with bf16 and
// MXFP4 weights, through the automatic choice and each CPU path explicitly.
//   ./build/release/bench/kimi_bench --benchmark_filter=linear
// Decode reports weight bytes per second (bytes_per_second), prefill GFLOP/s (2 M N K per call).
#include <benchmark/benchmark.h>

#include <random>

#include "../src/cpu/linear.h"  // cpu::linear_path (the bench has no private include path)
#include "kimi/ops/linear.h"

namespace {

using kimi::DType;
using kimi::Tensor;

// args: M, N (out), K (in), weights (0 bf16, 1 mxfp4), path (0 automatic, 1 fused, 2 panels, 3 tiles)
void BM_linear(benchmark::State& st) {
  const int64_t m = st.range(0), n = st.range(1), k = st.range(2);
  const bool mx = st.range(3) == 1;
  const auto path = static_cast<kimi::cpu::LinearPath>(st.range(4));
  Tensor x(DType::bf16, {m, k}), y(DType::bf16, {m, n});
  Tensor wd(DType::bf16, {mx ? 1 : n, mx ? 1 : k}), p(DType::u8, {n, k / 2}), s(DType::u8, {n, k / 32});
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> byte(0, 255), ex(118, 124), h(0x3c00, 0x3d00);
  for (int64_t i = 0; i < m * k; ++i) x.data_as<uint16_t>()[i] = uint16_t(h(rng) | (i % 2 ? 0x8000 : 0));
  if (mx) {
    for (int64_t i = 0; i < n * k / 2; ++i) p.data_as<uint8_t>()[i] = uint8_t(byte(rng));
    for (int64_t i = 0; i < n * k / 32; ++i) s.data_as<uint8_t>()[i] = uint8_t(ex(rng));
  } else {
    for (int64_t i = 0; i < n * k; ++i) wd.data_as<uint16_t>()[i] = uint16_t(h(rng) - 0x0800);
  }
  const kimi::Weight w = mx ? kimi::Weight{p, s} : kimi::Weight{wd, {}};
  for (auto _ : st) kimi::cpu::linear_path(x, w, y, 0.f, {}, path);
  const double wbytes = mx ? double(n * k / 2 + n * k / 32) : double(n * k * 2);
  st.SetBytesProcessed(int64_t(st.iterations() * wbytes));
  st.counters["GFLOP/s"] = benchmark::Counter(2.0 * double(m * n * k) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  st.SetLabel(std::string(mx ? "mxfp4" : "bf16") + (path == kimi::cpu::LinearPath::fused ? " fused"
                                                    : path == kimi::cpu::LinearPath::panels ? " panels"
                                                    : path == kimi::cpu::LinearPath::tiles  ? " tiles"
                                                                                            : " auto"));
}

void shapes(benchmark::internal::Benchmark* b) {
  // [2304 -> 4096], [4096 -> 2304], expert up [2304 -> 1024], expert down [1024 -> 2304]
  const int64_t nk[4][2] = {{4096, 2304}, {2304, 4096}, {1024, 2304}, {2304, 1024}};
  for (int64_t m : {1, 256})
    for (const auto& s : nk)
      for (int64_t mx : {0, 1})
        for (int64_t path : {1, 2, 3}) b->Args({m, s[0], s[1], mx, path});
  for (int64_t m : {2, 4, 8, 16})  // where the fused path stops paying
    for (int64_t path : {1, 2, 3}) b->Args({m, 4096, 2304, 0, path});
}
BENCHMARK(BM_linear)->Apply(shapes)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
