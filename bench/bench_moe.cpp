// CPU MoE at Kimi-Linear shapes: router at T=512, E=256, K=8; glu and the expert MLP; the latent MoE
// block (Kimi-Linear: no latent, SiLU, bf16 experts, scaling 2.446) at decode (T=1) and prefill
// (T=128) with d=2304, I=1024, 1 shared expert, E=64 of the 256 experts (to fit the machine).
#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

#include "kimi/ops/moe.h"

namespace {

using kimi::DType;
using kimi::Tensor;

// Uniform [lo, hi) from a splitmix64 stream (cheap enough for ~0.5 G weights).
Tensor random(DType dt, std::vector<int64_t> shape, double lo, double hi, uint64_t seed) {
  Tensor t(dt, std::span<const int64_t>(shape));
  uint64_t z = seed * 0x9E3779B97F4A7C15ull;
  for (int64_t i = 0; i < t.numel(); ++i) {
    uint64_t r = (z += 0x9E3779B97F4A7C15ull);
    r = (r ^ (r >> 30)) * 0xBF58476D1CE4E5B9ull;
    r = (r ^ (r >> 27)) * 0x94D049BB133111EBull;
    r ^= r >> 31;
    kimi::store_from_f32(t.data(), dt, i, float(lo + (hi - lo) * double(r >> 11) * 0x1.0p-53));
  }
  return t;
}

void BM_moe_router(benchmark::State& st) {
  const int64_t t = st.range(0), e = st.range(1), k = st.range(2);
  Tensor logits = random(DType::f32, {t, e}, -4, 4, 1), bias = random(DType::f32, {e}, -0.1, 0.1, 2);
  Tensor ids(DType::i32, {t, k}), w(DType::f32, {t, k});
  for (auto _ : st) kimi::moe_router(logits, bias, kimi::RouterParams{int(k), true, 2.446f}, ids, w);
  st.SetItemsProcessed(st.iterations() * t);
}
BENCHMARK(BM_moe_router)->Args({512, 256, 8})->Unit(benchmark::kMicrosecond);

void BM_moe_quantile_balance(benchmark::State& st) {
  const int64_t t = st.range(0), e = st.range(1), k = st.range(2);
  Tensor s = random(DType::f32, {t, e}, 0, 1, 3), bias(DType::f32, {e});
  for (auto _ : st) kimi::moe_quantile_balance(s, bias, int(k));
  st.SetItemsProcessed(st.iterations() * t);
}
BENCHMARK(BM_moe_quantile_balance)->Args({4096, 256, 8})->Unit(benchmark::kMillisecond);

void BM_glu_situ(benchmark::State& st) {
  const int64_t t = st.range(0), n = st.range(1);
  Tensor g = random(DType::bf16, {t, n}, -8, 8, 4), u = random(DType::bf16, {t, n}, -30, 30, 5),
         h(DType::bf16, {t, n});
  kimi::GluParams p;
  p.act = kimi::GluAct::situ;
  for (auto _ : st) kimi::glu(g, u, p, h);
  st.SetItemsProcessed(st.iterations() * t * n);
}
BENCHMARK(BM_glu_situ)->Args({128, 1024})->Unit(benchmark::kMicrosecond);

// One model's worth of MoE weights (bf16, dense), kept alive for the benchmark's lifetime.
struct KimiLinearMoe {
  static constexpr int64_t d = 2304, e = 64, k = 8, inter = 1024;
  std::vector<Tensor> keep;
  std::vector<kimi::MlpWeights> experts;
  kimi::MlpWeights shared;
  kimi::LatentMoeWeights w;
  Tensor bias;

  kimi::Weight make(int64_t out, int64_t in, uint64_t seed) {
    const double a = std::sqrt(3.0 / double(in));
    keep.push_back(random(DType::bf16, {out, in}, -a, a, seed));
    return kimi::Weight{keep.back().view(), {}};
  }
  KimiLinearMoe() {
    keep.reserve(size_t(3 * e + 8));
    for (int64_t j = 0; j < e; ++j)
      experts.push_back({make(inter, d, 10 + 3 * j), make(inter, d, 11 + 3 * j), make(d, inter, 12 + 3 * j)});
    shared = {make(inter, d, 7), make(inter, d, 8), make(d, inter, 9)};
    bias = random(DType::f32, {e}, -0.05, 0.05, 6);
    w.router = make(e, d, 5);
    w.router_bias = bias;
    w.experts = experts;
    w.shared = &shared;
  }
};

void BM_latent_moe_kimi_linear(benchmark::State& st) {
  static KimiLinearMoe m;  // ~0.9 GB of bf16 experts, built once
  const int64_t t = st.range(0);
  Tensor x = random(DType::bf16, {t, m.d}, -1, 1, 100), out(DType::bf16, {t, m.d});
  kimi::GluParams act;  // SiLU
  for (auto _ : st) kimi::latent_moe(x, m.w, kimi::RouterParams{int(m.k), true, 2.446f}, act, 1e-5f, out);
  st.SetItemsProcessed(st.iterations() * t);
}
BENCHMARK(BM_latent_moe_kimi_linear)->Arg(1)->Arg(128)->Unit(benchmark::kMillisecond)->MinTime(0.5);

}  // namespace
