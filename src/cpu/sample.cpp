// CPU sampling (kimi/ops/sample.h): the definition step by step, one row per loop iteration. Compiled with
// -ffp-contract=off (CMakeLists.txt) so that the fp64 weights of core/sample_math.h are the CUDA kernel's.
#include "cpu/sample.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "core/check.h"
#include "core/sample_math.h"
#include "cpu/tensor_io.h"

namespace kimi::cpu {
namespace sm = sample_math;

int32_t sample_row(const float* x, int64_t V, const SampleRow& p) {
  const float m = *std::max_element(x, x + V);
  if (p.temperature == 0.f) return int32_t(std::find(x, x + V, m) - x);  // the lowest id of the maximum
  // Candidates: the first K tokens by descending logit, ties by lower id (the order key merges -0 and +0).
  auto before = [&](int32_t a, int32_t b) {
    const uint32_t ka = sm::order_key(x[a]), kb = sm::order_key(x[b]);
    return ka > kb || (ka == kb && a < b);
  };
  std::vector<int32_t> ids(static_cast<size_t>(V));
  std::iota(ids.begin(), ids.end(), 0);
  if (p.top_k > 0 && p.top_k < V) {
    std::nth_element(ids.begin(), ids.begin() + (p.top_k - 1), ids.end(), before);
    ids.resize(size_t(p.top_k));
  }
  std::vector<uint64_t> wt(static_cast<size_t>(V));
  for (int32_t i : ids) wt[size_t(i)] = sm::weight(x[i], m, p.temperature);
  auto w = [&](int32_t i) { return wt[size_t(i)]; };
  if (p.top_p < 1.f) {
    // The nucleus: the shortest prefix in the order whose weight reaches need. Zero-weight candidates cannot end
    // it (the sum must grow to reach need) nor be drawn, so only the others are sorted.
    uint64_t z = 0;
    for (int32_t i : ids) z += w(i);
    const uint64_t need = sm::nucleus_need(p.top_p, z);
    std::erase_if(ids, [&](int32_t i) { return w(i) == 0; });
    std::sort(ids.begin(), ids.end(), before);
    uint64_t s = 0;
    size_t keep = 0;
    while (s < need) s += w(ids[keep++]);
    ids.resize(keep);
  }
  // Inverse CDF over the kept tokens in ascending id order.
  std::sort(ids.begin(), ids.end());
  uint64_t total = 0;
  for (int32_t i : ids) total += w(i);
  const uint64_t t = sm::scale_draw(p.draw, total);
  uint64_t cum = 0;
  for (int32_t i : ids)
    if ((cum += w(i)) > t) return i;
  return ids.back();  // unreachable: t < total
}

void sample_tokens(TensorView logits, const SampleParams& params, TensorView tokens, const Context& ctx) {
  const int64_t N = logits.size(0), V = logits.size(1);
  auto f32 = [](const TensorView& t, int64_t n) { return static_cast<const float*>(t.data)[n * t.stride(0)]; };
  auto i64 = [](const TensorView& t, int64_t n) { return static_cast<const int64_t*>(t.data)[n * t.stride(0)]; };
#pragma omp parallel num_threads(threads(ctx))
  {
    std::vector<float> row(static_cast<size_t>(V));
#pragma omp for schedule(dynamic)
    for (int64_t n = 0; n < N; ++n) {
      load_row(logits, n, row.data());
      SampleRow p;
      p.temperature = f32(params.temperature, n);
      p.top_k = static_cast<const int32_t*>(params.top_k.data)[n * params.top_k.stride(0)];
      p.top_p = f32(params.top_p, n);
      p.draw = sm::draw(uint64_t(i64(params.seed, n)), uint64_t(i64(params.sequence, n)), uint64_t(i64(params.step, n)));
      static_cast<int32_t*>(tokens.data)[n] = sample_row(row.data(), V, p);
    }
  }
}

}  // namespace kimi::cpu
