// CPU projection y = x W^T (+ beta y): weights are converted to f32 one panel of kPanel rows at a
// time (never a permanent f32 copy of the model) and multiplied with OpenBLAS sgemm.
#include "cpu/linear.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/tensor_io.h"

namespace kimi::cpu {

namespace {
constexpr int64_t kPanel = 256;  // weight rows converted per sgemm call

// E2M1 magnitudes (SPEC 10).
constexpr float kE2M1[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
}  // namespace

void mxfp4_decode_row(const uint8_t* packed, const uint8_t* scale, int64_t in, float* dst) {
  for (int64_t b = 0; b < in / 32; ++b) {
    const uint8_t e = scale[b];
    const float s = e == 255 ? NAN : std::ldexp(1.f, int(e) - 127);
    for (int64_t j = 0; j < 16; ++j) {
      const uint8_t byte = packed[b * 16 + j];
      const uint8_t lo = byte & 0xF, hi = byte >> 4;
      dst[b * 32 + 2 * j] = (lo & 8 ? -kE2M1[lo & 7] : kE2M1[lo & 7]) * s;
      dst[b * 32 + 2 * j + 1] = (hi & 8 ? -kE2M1[hi & 7] : kE2M1[hi & 7]) * s;
    }
  }
}

void weight_rows_f32(const Weight& w, int64_t r0, int64_t r1, float* dst) {
  const int64_t in = w.in_features();
  for (int64_t r = r0; r < r1; ++r) {
    float* out = dst + (r - r0) * in;
    if (w.is_mxfp4()) {
      mxfp4_decode_row(static_cast<const uint8_t*>(w.w.at({r, 0})), static_cast<const uint8_t*>(w.scale.at({r, 0})),
                       in, out);
    } else {
      load_row(w.w, r, out);
    }
  }
}

void linear(TensorView x, const Weight& w, TensorView y, float beta, const Context& ctx) {
  const int64_t m = x.size(0), k = w.in_features(), n = w.out_features();
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum (BLAS would reject lda = 0)
    if (beta == 0.f) {
      std::vector<float> zero(static_cast<size_t>(n), 0.f);
      for (int64_t r = 0; r < m; ++r) store_row(y, r, zero.data());
    }
    return;
  }
  // x as contiguous f32 [M, K] (a view of x itself when it already is f32 with unit-stride rows).
  std::vector<float> xs;
  const float* xp;
  int64_t ldx;
  if (x.dtype == DType::f32) {
    xp = static_cast<const float*>(x.data);
    ldx = m > 1 ? x.stride(0) : k;
    if (ldx < k) {  // overlapping rows (e.g. a broadcast): BLAS needs lda >= K
      xs = to_f32(x);
      xp = xs.data();
      ldx = k;
    }
  } else {
    xs = to_f32(x);
    xp = xs.data();
    ldx = k;
  }
  // y as f32 [M, N]: written in place when f32, else through a buffer.
  std::vector<float> ys;
  float* yp;
  int64_t ldy;
  if (y.dtype == DType::f32) {
    yp = static_cast<float*>(y.data);
    ldy = m > 1 ? y.stride(0) : n;
  } else {
    ys = beta != 0.f ? to_f32(y) : std::vector<float>(static_cast<size_t>(m * n));
    yp = ys.data();
    ldy = n;
  }
  const int64_t panels = (n + kPanel - 1) / kPanel;
  // NOTE: panels are independent, so threads take panels and each sgemm runs single-threaded;
  // for one-row decode this keeps every core converting weights.
  const int nt = threads(ctx);
  const int blas_threads = openblas_get_num_threads();
  openblas_set_num_threads(1);
#pragma omp parallel num_threads(nt)
  {
    std::vector<float> wp(static_cast<size_t>(kPanel * k));
#pragma omp for schedule(dynamic, 1)
    for (int64_t p = 0; p < panels; ++p) {
      const int64_t r0 = p * kPanel, r1 = std::min(n, r0 + kPanel);
      weight_rows_f32(w, r0, r1, wp.data());
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(r1 - r0), int(k), 1.f, xp, int(ldx), wp.data(),
                  int(k), beta, yp + r0, int(ldy));
    }
  }
  openblas_set_num_threads(blas_threads);
  if (y.dtype != DType::f32) from_f32(ys.data(), y);
}

}  // namespace kimi::cpu
