// Implementation of src/cpu/tensor_io.h.
#include "cpu/tensor_io.h"

#include <cstring>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace kimi::cpu {

int64_t num_rows(const TensorView& t) {
  int64_t n = 1;
  for (int d = 0; d + 1 < t.ndim; ++d) n *= t.shape[d];
  return n;
}

char* row_ptr(const TensorView& t, int64_t row) {
  int64_t off = 0;
  for (int d = t.ndim - 2; d >= 0; --d) {
    off += (row % t.shape[d]) * t.strides[d];
    row /= t.shape[d];
  }
  return static_cast<char*>(t.data) + off * int64_t(t.element_size());
}

void load_f32(const void* p, DType t, int64_t n, float* dst) {
  switch (t) {
    case DType::f32: std::memcpy(dst, p, size_t(n) * sizeof(float)); return;
    case DType::bf16: {
      const uint16_t* s = static_cast<const uint16_t*>(p);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case DType::f16: {
      const uint16_t* s = static_cast<const uint16_t*>(p);
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
    default:
      for (int64_t i = 0; i < n; ++i) dst[i] = load_as_f32(p, t, i);
  }
}

void store_f32(void* p, DType t, int64_t n, const float* src) {
  switch (t) {
    case DType::f32: std::memcpy(p, src, size_t(n) * sizeof(float)); return;
    case DType::bf16: {
      uint16_t* d = static_cast<uint16_t*>(p);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::f16: {
      uint16_t* d = static_cast<uint16_t*>(p);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
      return;
    }
    default:
      for (int64_t i = 0; i < n; ++i) store_from_f32(p, t, i, src[i]);
  }
}

void load_row(const TensorView& t, int64_t row, float* dst) {
  load_f32(row_ptr(t, row), t.dtype, t.ndim ? t.shape[t.ndim - 1] : 1, dst);
}

void store_row(const TensorView& t, int64_t row, const float* src) {
  store_f32(row_ptr(t, row), t.dtype, t.ndim ? t.shape[t.ndim - 1] : 1, src);
}

namespace {
// Calls fn(element_offset, linear_index) for every element in row-major order.
template <class Fn>
void for_each_offset(const TensorView& t, Fn fn) {
  const int64_t n = t.numel();
  std::vector<int64_t> idx(size_t(t.ndim), 0);
  int64_t off = 0;
  for (int64_t i = 0; i < n; ++i) {
    fn(off, i);
    for (int d = t.ndim - 1; d >= 0; --d) {
      if (++idx[size_t(d)] < t.shape[d]) {
        off += t.strides[d];
        break;
      }
      off -= (t.shape[d] - 1) * t.strides[d];
      idx[size_t(d)] = 0;
    }
  }
}
}  // namespace

std::vector<float> to_f32(const TensorView& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for_each_offset(t, [&](int64_t off, int64_t i) { out[size_t(i)] = load_as_f32(t.data, t.dtype, off); });
  return out;
}

void from_f32(const float* src, const TensorView& t) {
  for_each_offset(t, [&](int64_t off, int64_t i) { store_from_f32(t.data, t.dtype, off, src[i]); });
}

float round_to(DType t, float v) {
  switch (t) {
    case DType::bf16: return bf16_to_f32(f32_to_bf16(v));
    case DType::f16: return f16_to_f32(f32_to_f16(v));
    default: return v;
  }
}

int threads(const Context& ctx) {
#ifdef _OPENMP
  return ctx.cpu_threads > 0 ? ctx.cpu_threads : omp_get_max_threads();
#else
  (void)ctx;
  return 1;
#endif
}

}  // namespace kimi::cpu
