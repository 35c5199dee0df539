// CPU projection y = x W^T (+ beta y). Weights are never copied to f32 as a whole; three paths:
// - fused (any M; the automatic choice for M <= 16, and above when OpenBLAS is slow): threads take
//   blocks of weight rows, each weight vector is converted to f32 in registers and multiplied into up
//   to 4 rows of x (tiles of 4 x rows by 3 weight rows), so for decode the weights stream from memory
//   once and nothing is written but y (AVX-512 or AVX2/FMA/F16C; a portable loop through a one-row
//   buffer elsewhere).
// - panels: weight rows converted to f32 a panel at a time, then OpenBLAS sgemm, one panel per thread
//   (the automatic choice for M > 16 when OpenBLAS runs AVX-512 kernels: blas_is_fast below).
// - tiles: the same panels multiplied with the fused path's register tiles instead of sgemm (kept as
//   an explicit choice: on the machines measured it was not faster than fused).
#include "cpu/linear.h"

#include <cblas.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define KIMI_LINEAR_X86 1
#endif

#include "cpu/tensor_io.h"

namespace kimi::cpu {

namespace {
constexpr int64_t kPanel = 128;     // weight rows converted per sgemm call (128 x 2304 f32 = 1.2 MB)
constexpr int64_t kFusedMaxM = 16;  // x rows up to which the fused path is used (see docs/ops/linear.md)
constexpr int64_t kRowBlock = 24;  // weight rows per scheduling unit of the fused path

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

// MR rows of x against NR weight rows (MR <= 4, NR <= 3): 12 accumulators of 8 lanes at most, so each
// weight vector is converted once for MR rows of x and each x vector loaded once for NR weight rows.
// out[i * NR + r] = dot(x row i, weight row r).
template <int MR, int NR, class Load>
void tile_avx2(const Load* ld, const float* x, int64_t ldx, int64_t k, float* out) {
  __m256 a[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int r = 0; r < NR; ++r) a[i][r] = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= k; j += 8) {
    __m256 wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = ld[r](j);
    for (int i = 0; i < MR; ++i) {
      const __m256 xv = _mm256_loadu_ps(x + i * ldx + j);
      for (int r = 0; r < NR; ++r) a[i][r] = _mm256_fmadd_ps(wv[r], xv, a[i][r]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int r = 0; r < NR; ++r) {
      float t = hsum(a[i][r]);
      for (int64_t l = j; l < k; ++l) t += x[i * ldx + l] * ld[r].scalar(l);
      out[i * NR + r] = t;
    }
}

template <int MR, class Load>
void tile_avx2_nr(const Load* ld, int nr, const float* x, int64_t ldx, int64_t k, float* out) {
  switch (nr) {
    case 1: return tile_avx2<MR, 1>(ld, x, ldx, k, out);
    case 2: return tile_avx2<MR, 2>(ld, x, ldx, k, out);
    default: return tile_avx2<MR, 3>(ld, x, ldx, k, out);
  }
}

template <class Load>
void tile_avx2_any(const Load* ld, int mr, int nr, const float* x, int64_t ldx, int64_t k, float* out) {
  switch (mr) {
    case 1: return tile_avx2_nr<1>(ld, nr, x, ldx, k, out);
    case 2: return tile_avx2_nr<2>(ld, nr, x, ldx, k, out);
    case 3: return tile_avx2_nr<3>(ld, nr, x, ldx, k, out);
    default: return tile_avx2_nr<4>(ld, nr, x, ldx, k, out);
  }
}

// out[i * nr + r] = dot(x row i, weight row r0 + r) for i < mr <= 4, r < nr <= 3, weights read directly.
void tile_avx2w(const Weight& w, int64_t r0, int nr, const float* x, int64_t ldx, int mr, int64_t k, float* out) {
  if (w.is_mxfp4()) {
    const float* t = e8m0_table().data();
    const LoadMxfp4 l[3] = {
        {static_cast<const uint8_t*>(w.w.at({r0, 0})), static_cast<const uint8_t*>(w.scale.at({r0, 0})), t},
        {static_cast<const uint8_t*>(w.w.at({r0 + (nr > 1), 0})), static_cast<const uint8_t*>(w.scale.at({r0 + (nr > 1), 0})), t},
        {static_cast<const uint8_t*>(w.w.at({r0 + (nr > 2) * 2, 0})), static_cast<const uint8_t*>(w.scale.at({r0 + (nr > 2) * 2, 0})), t}};
    return tile_avx2_any(l, mr, nr, x, ldx, k, out);
  }
  const auto row = [&](int r) { return w.w.at({r0 + std::min(r, nr - 1), 0}); };
  switch (w.w.dtype) {
    case DType::bf16: {
      const LoadBF16 l[3] = {{static_cast<const uint16_t*>(row(0))}, {static_cast<const uint16_t*>(row(1))},
                             {static_cast<const uint16_t*>(row(2))}};
      return tile_avx2_any(l, mr, nr, x, ldx, k, out);
    }
    case DType::f16: {
      const LoadF16 l[3] = {{static_cast<const uint16_t*>(row(0))}, {static_cast<const uint16_t*>(row(1))},
                            {static_cast<const uint16_t*>(row(2))}};
      return tile_avx2_any(l, mr, nr, x, ldx, k, out);
    }
    default: {
      const LoadF32 l[3] = {{static_cast<const float*>(row(0))}, {static_cast<const float*>(row(1))},
                            {static_cast<const float*>(row(2))}};
      return tile_avx2_any(l, mr, nr, x, ldx, k, out);
    }
  }
}

// The same on f32 weight rows at p (row stride k), for the panel path.
void tile_avx2_f32(const float* p, int nr, const float* x, int64_t ldx, int mr, int64_t k, float* out) {
  const LoadF32 l[3] = {{p}, {p + (nr > 1) * k}, {p + (nr > 2) * 2 * k}};
  tile_avx2_any(l, mr, nr, x, ldx, k, out);
}

// Weight row r as f32 (vectorized weight_rows_f32).
template <class Load>
void convert_avx2(const Load& ld, int64_t k, float* dst) {
  int64_t j = 0;
  for (; j + 8 <= k; j += 8) _mm256_storeu_ps(dst + j, ld(j));
  for (; j < k; ++j) dst[j] = ld.scalar(j);
}

void row_f32_avx2(const Weight& w, int64_t r, float* dst) {
  const int64_t k = w.in_features();
  const void* p = w.w.at({r, 0});
  if (w.is_mxfp4())
    return convert_avx2(LoadMxfp4(static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(w.scale.at({r, 0})),
                                  e8m0_table().data()),
                        k, dst);
  switch (w.w.dtype) {
    case DType::bf16: return convert_avx2(LoadBF16{static_cast<const uint16_t*>(p)}, k, dst);
    case DType::f16: return convert_avx2(LoadF16{static_cast<const uint16_t*>(p)}, k, dst);
    default: return convert_avx2(LoadF32{static_cast<const float*>(p)}, k, dst);
  }
}

#pragma GCC pop_options

// KIMI_LINEAR_ISA=generic|avx2 caps the kernels below what the CPU offers (tests and comparisons;
// see docs/ops/linear.md): 0 generic, 1 AVX2, 2 AVX-512 (the default: the best the CPU has).
int isa_cap() {
  static const int cap = [] {
    const char* e = std::getenv("KIMI_LINEAR_ISA");
    if (e == nullptr) return 2;
    const std::string v(e);
    return v == "generic" ? 0 : v == "avx2" ? 1 : 2;
  }();
  return cap;
}

// ---- AVX-512: the same loaders and tiles 16 lanes wide. MXFP4 decodes 16 codes with one 16-entry
// permute (sign included). K tails use masked loads.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#pragma GCC diagnostic push
// NOTE: GCC 12 flags _mm256_undefined_pd() inside its own extract intrinsics as uninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
namespace z {

inline float hsum16(__m512 v) {
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  return hsum(_mm256_add_ps(_mm512_castps512_ps256(v), hi));
}

struct LoadF32 {
  const float* p;
  __m512 operator()(int64_t j) const { return _mm512_loadu_ps(p + j); }
  __m512 tail(int64_t j, __mmask16 m) const { return _mm512_maskz_loadu_ps(m, p + j); }
};
struct LoadBF16 {
  const uint16_t* p;
  static __m512 cvt(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  __m512 operator()(int64_t j) const { return cvt(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + j))); }
  __m512 tail(int64_t j, __mmask16 m) const { return cvt(_mm256_maskz_loadu_epi16(m, p + j)); }
};
struct LoadF16 {
  const uint16_t* p;
  __m512 operator()(int64_t j) const { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + j))); }
  __m512 tail(int64_t j, __mmask16 m) const { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p + j)); }
};
struct LoadMxfp4 {
  const uint8_t* p;
  const uint8_t* sc;
  const float* e8m0;
  __m512 tbl;
  __m512i shifts;
  LoadMxfp4(const uint8_t* packed, const uint8_t* scale, const float* table)
      : p(packed), sc(scale), e8m0(table),
        tbl(_mm512_setr_ps(0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f, -0.f, -0.5f, -1.f, -1.5f, -2.f, -3.f, -4.f, -6.f)),
        shifts(_mm512_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4)) {}
  __m512 operator()(int64_t j) const {  // 8 bytes = 16 codes, low nibble first
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + j / 2));
    // b0 b0 b1 b1 ... b7 b7 as 16 dwords, shifted right by 0, 4, 0, 4, ...: code k in lane k (bits 0-3).
    const __m512i d = _mm512_srlv_epi32(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(b, b)), shifts);
    const __m512 v = _mm512_permutexvar_ps(d, tbl);  // uses bits 0-3: sign and magnitude
    return _mm512_mul_ps(v, _mm512_set1_ps(e8m0[sc[j / 32]]));
  }
  __m512 tail(int64_t, __mmask16) const { return _mm512_setzero_ps(); }  // K % 32 == 0: never called
};

template <int MR, int NR, class Load>
void tile(const Load* ld, const float* x, int64_t ldx, int64_t k, float* out) {
  __m512 a[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int r = 0; r < NR; ++r) a[i][r] = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= k; j += 16) {
    __m512 wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = ld[r](j);
    for (int i = 0; i < MR; ++i) {
      const __m512 xv = _mm512_loadu_ps(x + i * ldx + j);
      for (int r = 0; r < NR; ++r) a[i][r] = _mm512_fmadd_ps(wv[r], xv, a[i][r]);
    }
  }
  if (j < k) {
    const __mmask16 m = __mmask16((1u << (k - j)) - 1u);
    __m512 wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = ld[r].tail(j, m);
    for (int i = 0; i < MR; ++i) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, x + i * ldx + j);
      for (int r = 0; r < NR; ++r) a[i][r] = _mm512_fmadd_ps(wv[r], xv, a[i][r]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int r = 0; r < NR; ++r) out[i * NR + r] = hsum16(a[i][r]);
}

template <int MR, class Load>
void tile_nr(const Load* ld, int nr, const float* x, int64_t ldx, int64_t k, float* out) {
  switch (nr) {
    case 1: return tile<MR, 1>(ld, x, ldx, k, out);
    case 2: return tile<MR, 2>(ld, x, ldx, k, out);
    default: return tile<MR, 3>(ld, x, ldx, k, out);
  }
}

template <class Load>
void tile_any(const Load* ld, int mr, int nr, const float* x, int64_t ldx, int64_t k, float* out) {
  switch (mr) {
    case 1: return tile_nr<1>(ld, nr, x, ldx, k, out);
    case 2: return tile_nr<2>(ld, nr, x, ldx, k, out);
    case 3: return tile_nr<3>(ld, nr, x, ldx, k, out);
    default: return tile_nr<4>(ld, nr, x, ldx, k, out);
  }
}

void tile_w(const Weight& w, int64_t r0, int nr, const float* x, int64_t ldx, int mr, int64_t k, float* out) {
  const auto row = [&](int r) { return r0 + std::min(r, nr - 1); };
  if (w.is_mxfp4()) {
    const float* t = e8m0_table().data();
    const auto pk = [&](int r) { return static_cast<const uint8_t*>(w.w.at({row(r), 0})); };
    const auto sc = [&](int r) { return static_cast<const uint8_t*>(w.scale.at({row(r), 0})); };
    const LoadMxfp4 l[3] = {{pk(0), sc(0), t}, {pk(1), sc(1), t}, {pk(2), sc(2), t}};
    return tile_any(l, mr, nr, x, ldx, k, out);
  }
  const auto ptr = [&](int r) { return w.w.at({row(r), 0}); };
  switch (w.w.dtype) {
    case DType::bf16: {
      const LoadBF16 l[3] = {{static_cast<const uint16_t*>(ptr(0))}, {static_cast<const uint16_t*>(ptr(1))},
                             {static_cast<const uint16_t*>(ptr(2))}};
      return tile_any(l, mr, nr, x, ldx, k, out);
    }
    case DType::f16: {
      const LoadF16 l[3] = {{static_cast<const uint16_t*>(ptr(0))}, {static_cast<const uint16_t*>(ptr(1))},
                            {static_cast<const uint16_t*>(ptr(2))}};
      return tile_any(l, mr, nr, x, ldx, k, out);
    }
    default: {
      const LoadF32 l[3] = {{static_cast<const float*>(ptr(0))}, {static_cast<const float*>(ptr(1))},
                            {static_cast<const float*>(ptr(2))}};
      return tile_any(l, mr, nr, x, ldx, k, out);
    }
  }
}

void tile_f32(const float* p, int nr, const float* x, int64_t ldx, int mr, int64_t k, float* out) {
  const LoadF32 l[3] = {{p}, {p + (nr > 1) * k}, {p + (nr > 2) * 2 * k}};
  tile_any(l, mr, nr, x, ldx, k, out);
}

template <class Load>
void convert(const Load& ld, int64_t k, float* dst) {
  int64_t j = 0;
  for (; j + 16 <= k; j += 16) _mm512_storeu_ps(dst + j, ld(j));
  if (j < k) {
    const __mmask16 m = __mmask16((1u << (k - j)) - 1u);
    _mm512_mask_storeu_ps(dst + j, m, ld.tail(j, m));
  }
}

void row_f32(const Weight& w, int64_t r, float* dst) {
  const int64_t k = w.in_features();
  const void* p = w.w.at({r, 0});
  if (w.is_mxfp4())
    return convert(LoadMxfp4(static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(w.scale.at({r, 0})),
                             e8m0_table().data()),
                   k, dst);
  switch (w.w.dtype) {
    case DType::bf16: return convert(LoadBF16{static_cast<const uint16_t*>(p)}, k, dst);
    case DType::f16: return convert(LoadF16{static_cast<const uint16_t*>(p)}, k, dst);
    default: return convert(LoadF32{static_cast<const float*>(p)}, k, dst);
  }
}

}  // namespace z
#pragma GCC diagnostic pop
#pragma GCC pop_options

bool have_avx512() {
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                         isa_cap() >= 2;
  return ok;
}

// The widest kernels the CPU runs (callers check have_avx2() first).
void tile_x86(const Weight& w, int64_t r0, int nr, const float* x, int64_t ldx, int mr, int64_t k, float* out) {
  if (have_avx512()) return z::tile_w(w, r0, nr, x, ldx, mr, k, out);
  tile_avx2w(w, r0, nr, x, ldx, mr, k, out);
}
void tile_x86_f32(const float* p, int nr, const float* x, int64_t ldx, int mr, int64_t k, float* out) {
  if (have_avx512()) return z::tile_f32(p, nr, x, ldx, mr, k, out);
  tile_avx2_f32(p, nr, x, ldx, mr, k, out);
}
void row_f32_x86(const Weight& w, int64_t r, float* dst) {
  if (have_avx512()) return z::row_f32(w, r, dst);
  row_f32_avx2(w, r, dst);
}

bool have_avx2() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                         __builtin_cpu_supports("f16c") && isa_cap() >= 1;
  return ok;
}
#endif  // KIMI_LINEAR_X86

bool use_simd() {
#ifdef KIMI_LINEAR_X86
  return have_avx2();
#else
  return false;
#endif
}

// y[i, r] (= or +=) acc for a tile of mr x rows and nr weight rows (acc[i * nr + r]).
inline void write_tile(float* y, int64_t ldy, int64_t r0, int mr, int nr, const float* acc, float beta) {
  for (int i = 0; i < mr; ++i)
    for (int r = 0; r < nr; ++r) {
      float& d = y[i * ldy + r0 + r];
      d = beta != 0.f ? d + acc[i * nr + r] : acc[i * nr + r];
    }
}

// Fused path: y = x W^T (+ y) reading the weights in place. x: f32 rows (stride ldx); y: f32 rows (stride
// ldy). Threads take blocks of kRowBlock weight rows; inside, tiles of 4 x rows by 3 weight rows.
void linear_fused(const float* x, int64_t ldx, const Weight& w, float* y, int64_t ldy, int64_t m, float beta,
                  const Context& ctx) {
  const int64_t n = w.out_features(), k = w.in_features();
  const int64_t blocks = (n + kRowBlock - 1) / kRowBlock;
  const bool simd = use_simd();
#pragma omp parallel num_threads(int(std::min<int64_t>(threads(ctx), blocks)))
  {
    std::vector<float> buf(simd ? 0 : static_cast<size_t>(k));
    float acc[12];
#pragma omp for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t rb = b * kRowBlock, re = std::min(n, rb + kRowBlock);
      for (int64_t i0 = 0; i0 < m; i0 += 4) {
        const int mr = int(std::min<int64_t>(4, m - i0));
        const float* xi = x + i0 * ldx;
        for (int64_t r = rb; r < re; r += 3) {
          const int nr = int(std::min<int64_t>(3, re - r));
#ifdef KIMI_LINEAR_X86
          if (simd) {
            tile_x86(w, r, nr, xi, ldx, mr, k, acc);
            write_tile(y + i0 * ldy, ldy, r, mr, nr, acc, beta);
            continue;
          }
#endif
          for (int t = 0; t < nr; ++t) {
            float a[4];
            dot_row_generic(w, r + t, xi, ldx, mr, k, buf.data(), a);
            for (int i = 0; i < mr; ++i) acc[i * nr + t] = a[i];
          }
          write_tile(y + i0 * ldy, ldy, r, mr, nr, acc, beta);
        }
      }
    }
  }
}

#ifdef KIMI_LINEAR_X86
// Own-kernel panel path (AVX2): panels of weight rows converted to f32 (about 512 KB, L2-resident),
// then tiles of 4 x rows by 3 weight rows as in the fused path.
void linear_tiles(const float* x, int64_t ldx, const Weight& w, float* y, int64_t ldy, int64_t m, float beta,
                  const Context& ctx) {
  const int64_t n = w.out_features(), k = w.in_features();
  const int64_t rows = std::clamp<int64_t>((int64_t(128) * 1024 / k) / 3 * 3, 3, 240);
  const int64_t panels = (n + rows - 1) / rows;
#pragma omp parallel num_threads(int(std::min<int64_t>(threads(ctx), panels)))
  {
    std::vector<float> wp(static_cast<size_t>(rows * k));
    float acc[12];
#pragma omp for schedule(dynamic, 1)
    for (int64_t p = 0; p < panels; ++p) {
      const int64_t r0 = p * rows, r1 = std::min(n, r0 + rows);
      for (int64_t r = r0; r < r1; ++r) row_f32_x86(w, r, wp.data() + (r - r0) * k);
      for (int64_t i0 = 0; i0 < m; i0 += 4) {
        const int mr = int(std::min<int64_t>(4, m - i0));
        for (int64_t r = r0; r < r1; r += 3) {
          const int nr = int(std::min<int64_t>(3, r1 - r));
          tile_x86_f32(wp.data() + (r - r0) * k, nr, x + i0 * ldx, ldx, mr, k, acc);
          write_tile(y + i0 * ldy, ldy, r, mr, nr, acc, beta);
        }
      }
    }
  }
}
#endif

// OpenBLAS picks its kernels from CPUID at load time and falls back to SSE3 ("Prescott") kernels on CPUs
// it does not know (0.3.21 on Emerald Rapids, for one): those run below this file's fused kernels even
// at M = 256 (about 25 vs 40 GFLOP/s per core), while its AVX-512 kernels run about 2x above them. So:
// sgemm for M > 16 when OpenBLAS runs AVX-512 kernels (or the CPU has no AVX2), the fused path
// otherwise. OPENBLAS_CORETYPE=SkylakeX fixes a wrong detection (docs/ops/linear.md).
bool blas_is_fast() {
  static const bool fast = [] {
    if (!use_simd()) return true;
    const std::string core = openblas_get_corename();
    for (const char* c : {"SkylakeX", "CooperLake", "SapphireRapids"})
      if (core.find(c) != std::string::npos) return true;
    return false;
  }();
  return fast;
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
      for (int64_t r = r0; r < r1; ++r) {
#ifdef KIMI_LINEAR_X86
        if (use_simd()) {
          row_f32_x86(w, r, wp.data() + (r - r0) * k);
          continue;
        }
#endif
        weight_rows_f32(w, r, r + 1, wp.data() + (r - r0) * k);
      }
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
  if (path == LinearPath::automatic)
    path = m > kFusedMaxM && blas_is_fast() ? LinearPath::panels : LinearPath::fused;
  const bool fused = path == LinearPath::fused;
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
    linear_fused(xp, ldx, w, yp, ldy, m, beta, ctx);
  } else if (path == LinearPath::tiles && use_simd()) {
#ifdef KIMI_LINEAR_X86
    linear_tiles(xp, ldx, w, yp, ldy, m, beta, ctx);
#endif
  } else {
    linear_panels(xp, ldx, w, yp, ldy, m, beta, ctx);
  }
  if (y.dtype != DType::f32) from_f32(ys.data(), y);
}

void linear(TensorView x, const Weight& w, TensorView y, float beta, const Context& ctx) {
  linear_path(x, w, y, beta, ctx, LinearPath::automatic);
}

void linear_many(std::span<const LinearJob> jobs, const Context& ctx) {
  for (const LinearJob& j : jobs) cpu::linear(j.x, j.w, j.y, j.beta, ctx);
}

}  // namespace kimi::cpu
