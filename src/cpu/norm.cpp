// CPU norms (SPEC 3): one row per loop iteration, rows spread over threads, fp32 throughout.
#include "cpu/norm.h"

#include <cmath>
#include <vector>

#include "cpu/tensor_io.h"

namespace kimi::cpu {

namespace {
// inv_rms = rsqrt(mean(x^2) + eps), accumulated in double for a reference-grade sum.
float inv_rms(const float* x, int64_t d, float eps) {
  double ss = 0;
  for (int64_t i = 0; i < d; ++i) ss += double(x[i]) * x[i];
  return float(1.0 / std::sqrt(ss / double(d) + double(eps)));
}
}  // namespace

void rms_norm(TensorView x, TensorView w, float eps, TensorView y, const Context& ctx) {
  const int64_t rows = num_rows(x), d = x.size(-1);
  const std::vector<float> wf = to_f32(w);  // [D]
#pragma omp parallel num_threads(threads(ctx))
  {
    std::vector<float> r(static_cast<size_t>(d));
#pragma omp for schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      load_row(x, row, r.data());
      const float s = inv_rms(r.data(), d, eps);
      // NOTE: HF casts the normalized value to the input dtype before the weight multiplies it.
      for (int64_t i = 0; i < d; ++i) r[size_t(i)] = wf[size_t(i)] * round_to(x.dtype, r[size_t(i)] * s);
      store_row(y, row, r.data());
    }
  }
}

void add_rms_norm(TensorView x, TensorView residual, TensorView w, float eps, TensorView sum, TensorView y,
                  const Context& ctx) {
  const int64_t rows = num_rows(x), d = x.size(-1);
  const std::vector<float> wf = to_f32(w);
#pragma omp parallel num_threads(threads(ctx))
  {
    std::vector<float> a(static_cast<size_t>(d)), b(static_cast<size_t>(d));
#pragma omp for schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      load_row(x, row, a.data());
      load_row(residual, row, b.data());
      for (int64_t i = 0; i < d; ++i) a[size_t(i)] = round_to(sum.dtype, a[size_t(i)] + b[size_t(i)]);
      store_row(sum, row, a.data());
      const float s = inv_rms(a.data(), d, eps);
      for (int64_t i = 0; i < d; ++i) a[size_t(i)] = wf[size_t(i)] * round_to(sum.dtype, a[size_t(i)] * s);
      store_row(y, row, a.data());
    }
  }
}

void gated_rms_norm(TensorView o, TensorView z, TensorView w, float eps, TensorView y, const Context& ctx) {
  const int64_t rows = num_rows(o), d = o.size(-1);
  const std::vector<float> wf = to_f32(w);
#pragma omp parallel num_threads(threads(ctx))
  {
    std::vector<float> a(static_cast<size_t>(d)), g(static_cast<size_t>(d));
#pragma omp for schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      load_row(o, row, a.data());
      const float s = inv_rms(a.data(), d, eps);
      if (z.present()) load_row(z, row, g.data());
      for (int64_t i = 0; i < d; ++i) {
        float v = wf[size_t(i)] * (a[size_t(i)] * s);
        if (z.present()) v *= 1.f / (1.f + std::exp(-g[size_t(i)]));
        a[size_t(i)] = v;
      }
      store_row(y, row, a.data());
    }
  }
}

void l2_norm(TensorView x, TensorView y, float eps, const Context& ctx) {
  const int64_t rows = num_rows(x), d = x.size(-1);
#pragma omp parallel num_threads(threads(ctx))
  {
    std::vector<float> a(static_cast<size_t>(d));
#pragma omp for schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      load_row(x, row, a.data());
      double ss = 0;
      for (int64_t i = 0; i < d; ++i) ss += double(a[size_t(i)]) * a[size_t(i)];
      const float s = float(1.0 / std::sqrt(ss + double(eps)));
      for (int64_t i = 0; i < d; ++i) a[size_t(i)] *= s;
      store_row(y, row, a.data());
    }
  }
}

}  // namespace kimi::cpu
