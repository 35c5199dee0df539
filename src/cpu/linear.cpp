// CPU projection y = x W^T (+ beta y), two paths:
// - small M (decode): fused dot products. Threads take blocks of weight rows; each weight element is
//   converted to f32 in registers and multiplied into all M rows of x in the same pass, so the weight
//   is read once from memory and never written anywhere (AVX2/FMA/F16C when the CPU has them).
// - larger M (prefill): weights are converted to f32 one panel of kPanel rows at a time (never a
//   permanent f32 copy of the model) and multiplied with OpenBLAS sgemm, one panel per thread.
#include "cpu/linear.h"

#include <cblas.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define KIMI_LINEAR_X86 1
#endif

#include "cpu/tensor_io.h"

namespace kimi::cpu {

namespace {
constexpr int64_t kPanel = 128;     // weight rows converted per sgemm call (128 x 2304 f32 = 1.2 MB)
constexpr int64_t kFusedMaxM = 4;  // x rows up to which the fused path is used (see docs/ops/linear.md)
constexpr int64_t kRowBlock = 16;  // weight rows per scheduling unit of the fused path

// E2M1 magnitudes (SPEC 10).
constexpr float kE2M1[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};

// E8M0 scale values: 2^(e-127) for e < 255 (e = 0 is the subnormal 2^-127), NaN for 255.
const std::array<float, 256>& e8m0_table() {
  static const std::array<float, 256> t = [] {
    std::array<float, 256> a{};
    for (int e = 0; e < 255; ++e) a[size_t(e)] = std::ldexp(1.f, e - 127);
    a[255] = NAN;
    return a;
  }();
  return t;
}
}  // namespace

void mxfp4_decode_row(const uint8_t* packed, const uint8_t* scale, int64_t in, float* dst) {
  const auto& e8m0 = e8m0_table();
  for (int64_t b = 0; b < in / 32; ++b) {
    const float s = e8m0[scale[b]];
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

namespace {

// ---- fused small-M path ------------------------------------------------------------------------
// acc[m] = sum_k x[m, k] * W[row, k] for one weight row, m < M.

// Portable version: the row goes through an f32 buffer (one row, L1-resident).
void dot_row_generic(const Weight& w, int64_t row, const float* x, int64_t ldx, int64_t m, int64_t k, float* buf,
                     float* acc) {
  weight_rows_f32(w, row, row + 1, buf);
  for (int64_t i = 0; i < m; ++i) {
    const float* xi = x + i * ldx;
    float a[8] = {};
    int64_t j = 0;
    for (; j + 8 <= k; j += 8)
      for (int l = 0; l < 8; ++l) a[l] += xi[j + l] * buf[j + l];
    float s = ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
    for (; j < k; ++j) s += xi[j] * buf[j];
    acc[i] = s;
  }
}

#ifdef KIMI_LINEAR_X86
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// 8 weights at column j (a multiple of 8) as f32.
struct LoadF32 {
  const float* p;
  __m256 operator()(int64_t j) const { return _mm256_loadu_ps(p + j); }
  float scalar(int64_t j) const { return p[j]; }
};
struct LoadBF16 {
  const uint16_t* p;
  __m256 operator()(int64_t j) const {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + j));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  float scalar(int64_t j) const { return bf16_to_f32(p[j]); }
};
struct LoadF16 {
  const uint16_t* p;
  __m256 operator()(int64_t j) const { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + j))); }
  float scalar(int64_t j) const { return f16_to_f32(p[j]); }
};
// MXFP4: 4 packed bytes hold 8 codes, low nibble first; value = mag[code & 7] * sign * scale, the same
// product as mxfp4_decode_row (bit-identical weights).
struct LoadMxfp4 {
  const uint8_t* p;
  const uint8_t* sc;
  const float* e8m0;
  __m256 mag, shifts;
  LoadMxfp4(const uint8_t* packed, const uint8_t* scale, const float* table)
      : p(packed), sc(scale), e8m0(table),
        mag(_mm256_setr_ps(0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f)),
        shifts(_mm256_castsi256_ps(_mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28))) {}
  __m256 operator()(int64_t j) const {
    int32_t word;
    __builtin_memcpy(&word, p + j / 2, 4);
    const __m256i codes =
        _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(word), _mm256_castps_si256(shifts)), _mm256_set1_epi32(15));
    const __m256 m = _mm256_permutevar8x32_ps(mag, codes);  // uses bits 0-2
    const __m256 sign = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_srli_epi32(codes, 3), 31));
    return _mm256_mul_ps(_mm256_xor_ps(m, sign), _mm256_set1_ps(e8m0[sc[j / 32]]));
  }
  float scalar(int64_t) const { return 0.f; }  // K % 32 == 0: never called
};

// One weight row against M rows of x (M <= 4): two 8-wide accumulators per x row.
template <int M, class Load>
void dot_row_avx2(const Load& load, const float* x, int64_t ldx, int64_t k, float* acc) {
  __m256 a0[M], a1[M];
  for (int i = 0; i < M; ++i) a0[i] = a1[i] = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= k; j += 16) {
    const __m256 w0 = load(j), w1 = load(j + 8);
    for (int i = 0; i < M; ++i) {
      a0[i] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i * ldx + j), a0[i]);
      a1[i] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + i * ldx + j + 8), a1[i]);
    }
  }
  if (j + 8 <= k) {
    const __m256 w0 = load(j);
    for (int i = 0; i < M; ++i) a0[i] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i * ldx + j), a0[i]);
    j += 8;
  }
  for (int i = 0; i < M; ++i) {
    float s = hsum(_mm256_add_ps(a0[i], a1[i]));
    for (int64_t t = j; t < k; ++t) s += x[i * ldx + t] * load.scalar(t);
    acc[i] = s;
  }
}

template <class Load>
void dot_row_avx2_m(const Load& load, const float* x, int64_t ldx, int64_t m, int64_t k, float* acc) {
  switch (m) {
    case 1: return dot_row_avx2<1>(load, x, ldx, k, acc);
    case 2: return dot_row_avx2<2>(load, x, ldx, k, acc);
    case 3: return dot_row_avx2<3>(load, x, ldx, k, acc);
    default: return dot_row_avx2<4>(load, x, ldx, k, acc);
  }
}

void dot_row_x86(const Weight& w, int64_t row, const float* x, int64_t ldx, int64_t m, int64_t k, float* acc) {
  const void* p = w.w.at({row, 0});
  if (w.is_mxfp4()) {
    const LoadMxfp4 l(static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(w.scale.at({row, 0})),
                      e8m0_table().data());
    return dot_row_avx2_m(l, x, ldx, m, k, acc);
  }
  switch (w.w.dtype) {
    case DType::bf16: return dot_row_avx2_m(LoadBF16{static_cast<const uint16_t*>(p)}, x, ldx, m, k, acc);
    case DType::f16: return dot_row_avx2_m(LoadF16{static_cast<const uint16_t*>(p)}, x, ldx, m, k, acc);
    default: return dot_row_avx2_m(LoadF32{static_cast<const float*>(p)}, x, ldx, m, k, acc);
  }
}

#pragma GCC pop_options

bool have_avx2() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                         __builtin_cpu_supports("f16c");
  return ok;
}
#endif  // KIMI_LINEAR_X86

// y[i, :] (= or +=) x[i, :] W^T for i < m <= kFusedMaxM. x: f32 rows (stride ldx); y: f32 rows (stride ldy).
void linear_fused(const float* x, int64_t ldx, const Weight& w, float* y, int64_t ldy, int64_t m, float beta,
                  const Context& ctx) {
  const int64_t n = w.out_features(), k = w.in_features();
  const int64_t blocks = (n + kRowBlock - 1) / kRowBlock;
#ifdef KIMI_LINEAR_X86
  const bool simd = have_avx2();
#else
  const bool simd = false;
#endif
#pragma omp parallel num_threads(int(std::min<int64_t>(threads(ctx), blocks)))
  {
    std::vector<float> buf(simd ? 0 : static_cast<size_t>(k));
    float acc[kFusedMaxM];
#pragma omp for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      for (int64_t r = b * kRowBlock; r < std::min(n, (b + 1) * kRowBlock); ++r) {
#ifdef KIMI_LINEAR_X86
        if (simd)
          dot_row_x86(w, r, x, ldx, m, k, acc);
        else
#endif
          dot_row_generic(w, r, x, ldx, m, k, buf.data(), acc);
        for (int64_t i = 0; i < m; ++i) y[i * ldy + r] = beta != 0.f ? y[i * ldy + r] + acc[i] : acc[i];
      }
    }
  }
}

// ---- panel + sgemm path ------------------------------------------------------------------------
void linear_panels(const float* x, int64_t ldx, const Weight& w, float* y, int64_t ldy, int64_t m, float beta,
                   const Context& ctx) {
  const int64_t n = w.out_features(), k = w.in_features();
  const int64_t panels = (n + kPanel - 1) / kPanel;
  // NOTE: panels are independent, so threads take panels and each sgemm runs single-threaded.
  const int blas_threads = openblas_get_num_threads();
  openblas_set_num_threads(1);
#pragma omp parallel num_threads(int(std::min<int64_t>(threads(ctx), panels)))
  {
    std::vector<float> wp(static_cast<size_t>(kPanel * k));
#pragma omp for schedule(dynamic, 1)
    for (int64_t p = 0; p < panels; ++p) {
      const int64_t r0 = p * kPanel, r1 = std::min(n, r0 + kPanel);
      weight_rows_f32(w, r0, r1, wp.data());
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(r1 - r0), int(k), 1.f, x, int(ldx), wp.data(),
                  int(k), beta, y + r0, int(ldy));
    }
  }
  openblas_set_num_threads(blas_threads);
}

}  // namespace

void linear_path(TensorView x, const Weight& w, TensorView y, float beta, const Context& ctx, LinearPath path) {
  const int64_t m = x.size(0), k = w.in_features(), n = w.out_features();
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum (BLAS would also reject lda = 0)
    if (beta == 0.f) {
      std::vector<float> zero(static_cast<size_t>(n), 0.f);
      for (int64_t r = 0; r < m; ++r) store_row(y, r, zero.data());
    }
    return;
  }
  const bool fused = path == LinearPath::fused || (path == LinearPath::automatic && m <= kFusedMaxM);
  // x as f32 rows: x itself when it is f32 with rows at least K apart (BLAS needs lda >= K), else a copy.
  std::vector<float> xs;
  const float* xp = static_cast<const float*>(x.data);
  int64_t ldx = m > 1 ? x.stride(0) : k;
  if (x.dtype != DType::f32 || ldx < k) {
    xs = to_f32(x);
    xp = xs.data();
    ldx = k;
  }
  // y as f32 rows: written in place when f32 (rows do not overlap: checked), else through a buffer.
  std::vector<float> ys;
  float* yp = static_cast<float*>(y.data);
  int64_t ldy = m > 1 ? y.stride(0) : n;
  if (y.dtype != DType::f32) {
    ys = beta != 0.f ? to_f32(y) : std::vector<float>(static_cast<size_t>(m * n));
    yp = ys.data();
    ldy = n;
  }
  if (fused) {
    for (int64_t i0 = 0; i0 < m; i0 += kFusedMaxM)
      linear_fused(xp + i0 * ldx, ldx, w, yp + i0 * ldy, ldy, std::min(kFusedMaxM, m - i0), beta, ctx);
  } else {
    linear_panels(xp, ldx, w, yp, ldy, m, beta, ctx);
  }
  if (y.dtype != DType::f32) from_f32(ys.data(), y);
}

void linear(TensorView x, const Weight& w, TensorView y, float beta, const Context& ctx) {
  linear_path(x, w, y, beta, ctx, LinearPath::automatic);
}

}  // namespace kimi::cpu
