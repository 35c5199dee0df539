// CPU KDA at Kimi-Linear shapes (scaled to the machine): recurrent vs chunkwise forward at B=1, T=8192,
// H=8, K=V=128 (f32 and bf16 inputs), and the fused gate at the Kimi-Linear projection shape.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "kimi/ops/kda.h"

namespace {

using kimi::DType;
using kimi::Tensor;

void fill(const Tensor& t, std::mt19937_64& rng, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (float& x : v) x = u(rng);
  for (int64_t i = 0; i < t.numel(); ++i) kimi::store_from_f32(t.data(), t.view().dtype, i, v[size_t(i)]);
}

// args: T, H, dtype (0 f32, 1 bf16), chunk (0: recurrent form, else the chunk form with that chunk size)
void BM_kda_fwd(benchmark::State& st) {
  const int64_t T = st.range(0), H = st.range(1), K = 128, V = 128;
  const DType dt = st.range(2) ? DType::bf16 : DType::f32;
  std::mt19937_64 rng(7);
  Tensor q(dt, {1, T, H, K}), k(dt, {1, T, H, K}), v(dt, {1, T, H, V}), f(dt, {1, T, H, K}), b(dt, {1, T, H});
  Tensor o(dt, {1, T, H, V}), h0(DType::f32, {1, H, K, V}), ht(DType::f32, {1, H, K, V});
  Tensor A_log(DType::f32, {H}), dt_bias(DType::f32, {H * K});
  fill(q, rng, -1, 1), fill(k, rng, -1, 1), fill(v, rng, -1, 1), fill(f, rng, -8, 8), fill(b, rng, -4, 4);
  fill(A_log, rng, -2, 1), fill(dt_bias, rng, -8, 8), fill(h0, rng, -1, 1);
  kimi::KdaArgs a;
  a.q = q, a.k = k, a.v = v, a.g = f, a.beta = b, a.o = o;
  a.gate = kimi::KdaGate{kimi::GateForm::softplus, A_log, dt_bias, -5.f};
  a.beta_sigmoid_in_kernel = a.qk_l2norm_in_kernel = true;
  a.initial_state = h0, a.final_state = ht;
  for (auto _ : st) {
    if (st.range(3))
      kimi::kda_chunk_fwd(a, int(st.range(3)));
    else
      kimi::kda_recurrent_fwd(a);
  }
  st.SetItemsProcessed(st.iterations() * T * H);  // token-heads
}
BENCHMARK(BM_kda_fwd)
    ->ArgNames({"T", "H", "bf16", "chunk"})
    ->Args({8192, 8, 0, 0})
    ->Args({8192, 8, 0, 64})
    ->Args({8192, 8, 0, 16})
    ->Args({8192, 8, 1, 0})
    ->Args({8192, 8, 1, 64})
    ->Args({8192, 8, 1, 16})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Fused gate at the Kimi-Linear projection: f [T, 32, 128] bf16 -> g f32.
void BM_kda_gate(benchmark::State& st) {
  const int64_t T = st.range(0), H = 32, K = 128;
  std::mt19937_64 rng(9);
  Tensor f(DType::bf16, {T, H, K}), g(DType::f32, {T, H, K}), A_log(DType::f32, {H}),
      dt_bias(DType::f32, {H, K});
  fill(f, rng, -8, 8), fill(A_log, rng, -2, 1), fill(dt_bias, rng, -8, 8);
  const kimi::KdaGate gate{st.range(1) ? kimi::GateForm::bounded : kimi::GateForm::softplus, A_log, dt_bias,
                           -5.f};
  for (auto _ : st) kimi::kda_gate(f, gate, g);
  st.SetItemsProcessed(st.iterations() * T * H * K);
}
BENCHMARK(BM_kda_gate)
    ->ArgNames({"T", "bounded"})
    ->Args({4096, 0})
    ->Args({4096, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
