// Implementation of src/cpu/tensor_io.h.
#include "cpu/tensor_io.h"

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

namespace {
// One dtype switch per row, then a tight typed loop the compiler vectorizes.
template <class F>
void with_row_type(DType t, F&& f) {
  switch (t) {
    case DType::f32: return f([](const void* p, int64_t i) { return static_cast<const float*>(p)[i]; },
                              [](void* p, int64_t i, float v) { static_cast<float*>(p)[i] = v; });
    case DType::bf16: return f([](const void* p, int64_t i) { return bf16_to_f32(static_cast<const uint16_t*>(p)[i]); },
                               [](void* p, int64_t i, float v) { static_cast<uint16_t*>(p)[i] = f32_to_bf16(v); });
    case DType::f16: return f([](const void* p, int64_t i) { return f16_to_f32(static_cast<const uint16_t*>(p)[i]); },
                              [](void* p, int64_t i, float v) { static_cast<uint16_t*>(p)[i] = f32_to_f16(v); });
    default: return f([t](const void* p, int64_t i) { return load_as_f32(p, t, i); },
                      [t](void* p, int64_t i, float v) { store_from_f32(p, t, i, v); });
  }
}
}  // namespace

void load_row(const TensorView& t, int64_t row, float* dst) {
  const int64_t n = t.ndim ? t.shape[t.ndim - 1] : 1;
  const void* p = row_ptr(t, row);
  with_row_type(t.dtype, [&](auto load, auto) {
    for (int64_t i = 0; i < n; ++i) dst[i] = load(p, i);
  });
}

void store_row(const TensorView& t, int64_t row, const float* src) {
  const int64_t n = t.ndim ? t.shape[t.ndim - 1] : 1;
  void* p = row_ptr(t, row);
  with_row_type(t.dtype, [&](auto, auto store) {
    for (int64_t i = 0; i < n; ++i) store(p, i, src[i]);
  });
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
