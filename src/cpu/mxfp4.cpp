// CPU MXFP4 dequantization and quantization (SPEC 10). Dequantization reuses the one decoder of the
// project, cpu::mxfp4_decode_row (src/cpu/linear.cpp); rows are spread over threads.
#include "cpu/mxfp4.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/linear.h"
#include "cpu/tensor_io.h"

namespace kimi::cpu {

namespace {
// Nearest E2M1 magnitude code (0..7) of q >= 0, ties to the even code, saturating at 6 (code 7).
// Decision points are the midpoints between neighbouring magnitudes {0, .5, 1, 1.5, 2, 3, 4, 6}.
uint8_t e2m1_code(float q) {
  if (q <= 0.25f) return 0;   // tie 0.25 -> code 0 (0)
  if (q < 0.75f) return 1;    // 0.5
  if (q <= 1.25f) return 2;   // ties 0.75 and 1.25 -> code 2 (1)
  if (q < 1.75f) return 3;    // 1.5
  if (q <= 2.5f) return 4;    // ties 1.75 and 2.5 -> code 4 (2)
  if (q < 3.5f) return 5;     // 3
  if (q <= 5.f) return 6;     // ties 3.5 and 5 -> code 6 (4)
  return 7;                   // 6, and everything above saturates
}
}  // namespace

uint8_t mxfp4_quant_block(const float* v, uint8_t* packed) {
  float amax = 0.f;
  bool finite = true;
  for (int i = 0; i < 32; ++i) {
    finite = finite && std::isfinite(v[i]);
    amax = std::fmax(amax, std::fabs(v[i]));
  }
  if (!finite) {  // NaN or Inf anywhere: the E8M0 NaN scale (the whole block decodes to NaN), codes 0
    for (int j = 0; j < 16; ++j) packed[j] = 0;
    return 255;
  }
  int e = 0;
  if (amax > 0.f) {
    int ex;
    std::frexp(amax, &ex);  // amax = m * 2^ex, m in [0.5, 1): floor(log2(amax)) = ex - 1 (exact, subnormals too)
    e = std::clamp(ex - 1 - 2 + 127, 0, 254);
  }
  // v / 2^(e-127) as a product with 2^(127-e) (a normal or subnormal f32 for e in 0..254): exact whenever
  // the result is a normal f32, and results below 2^-126 all round to code 0 anyway.
  const float inv = std::ldexp(1.f, 127 - e);
  uint8_t codes[32];
  for (int i = 0; i < 32; ++i) {
    const float q = std::fabs(v[i]) * inv;
    codes[i] = uint8_t((std::signbit(v[i]) ? 8 : 0) | e2m1_code(q));
  }
  for (int j = 0; j < 16; ++j) packed[j] = uint8_t(codes[2 * j] | (codes[2 * j + 1] << 4));
  return uint8_t(e);
}

void mxfp4_dequant(TensorView packed, TensorView scale, TensorView w, const Context& ctx) {
  const int64_t rows = w.size(0), in = w.size(1);
#pragma omp parallel num_threads(threads(ctx))
  {
    std::vector<float> r(static_cast<size_t>(in));
#pragma omp for schedule(static)
    for (int64_t o = 0; o < rows; ++o) {
      const auto* p = reinterpret_cast<const uint8_t*>(row_ptr(packed, o));
      const auto* s = reinterpret_cast<const uint8_t*>(row_ptr(scale, o));
      if (w.dtype == DType::f32) {
        mxfp4_decode_row(p, s, in, reinterpret_cast<float*>(row_ptr(w, o)));
      } else {
        mxfp4_decode_row(p, s, in, r.data());
        store_row(w, o, r.data());
      }
    }
  }
}

void mxfp4_quant(TensorView w, TensorView packed, TensorView scale, const Context& ctx) {
  const int64_t rows = w.size(0), in = w.size(1);
#pragma omp parallel num_threads(threads(ctx))
  {
    std::vector<float> r(static_cast<size_t>(in));
#pragma omp for schedule(static)
    for (int64_t o = 0; o < rows; ++o) {
      load_row(w, o, r.data());
      auto* p = reinterpret_cast<uint8_t*>(row_ptr(packed, o));
      auto* s = reinterpret_cast<uint8_t*>(row_ptr(scale, o));
      for (int64_t b = 0; b < in / 32; ++b) s[b] = mxfp4_quant_block(r.data() + b * 32, p + b * 16);
    }
  }
}

}  // namespace kimi::cpu
