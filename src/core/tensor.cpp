// Implementation of kimi/tensor.h.
#include "kimi/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "kimi/device.h"
#include "kimi/error.h"

namespace kimi {

std::string to_string(Device d) {
  if (d.type == DeviceType::cpu) return d.index == 0 ? std::string("cpu") : "cpu:" + std::to_string(d.index);
  return "cuda:" + std::to_string(d.index);
}

TensorView::TensorView(void* data_, DType dtype_, std::span<const int64_t> shape_, Device device_)
    : data(data_), dtype(dtype_), device(device_), ndim(int(shape_.size())) {
  if (shape_.size() > size_t(kMaxDims)) throw Error("TensorView: at most 6 dimensions");
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    shape[d] = shape_[d];
    strides[d] = s;
    s *= shape_[d];
  }
}

TensorView::TensorView(void* data_, DType dtype_, std::span<const int64_t> shape_,
                       std::span<const int64_t> strides_, Device device_)
    : data(data_), dtype(dtype_), device(device_), ndim(int(shape_.size())) {
  if (shape_.size() > size_t(kMaxDims)) throw Error("TensorView: at most 6 dimensions");
  if (strides_.size() != shape_.size()) throw Error("TensorView: shape and strides differ in length");
  for (int d = 0; d < ndim; ++d) {
    shape[d] = shape_[d];
    strides[d] = strides_[d];
  }
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= shape[d];
  return n;
}

bool TensorView::is_contiguous() const {
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    if (shape[d] != 1 && strides[d] != s) return false;
    s *= shape[d];
  }
  return true;
}

void* TensorView::at(std::initializer_list<int64_t> idx) const {
  int64_t off = 0;
  int d = 0;
  for (int64_t i : idx) off += i * strides[d++];
  return static_cast<char*>(data) + off * int64_t(element_size());
}

TensorView TensorView::reshape(std::initializer_list<int64_t> new_shape) const {
  if (!is_contiguous()) throw Error("TensorView::reshape: view " + shape_string() + " is not contiguous");
  TensorView v(data, dtype, std::span<const int64_t>(new_shape.begin(), new_shape.size()), device);
  if (v.numel() != numel())
    throw Error("TensorView::reshape: " + shape_string() + " has " + std::to_string(numel()) +
                " elements, new shape " + v.shape_string() + " has " + std::to_string(v.numel()));
  return v;
}

TensorView TensorView::slice(int d, int64_t begin, int64_t end) const {
  if (d < 0) d += ndim;
  if (d < 0 || d >= ndim || begin < 0 || end < begin || end > shape[d])
    throw Error("TensorView::slice: range [" + std::to_string(begin) + ", " + std::to_string(end) +
                ") out of bounds for dim " + std::to_string(d) + " of " + shape_string());
  TensorView v = *this;
  v.data = static_cast<char*>(data) + begin * strides[d] * int64_t(element_size());
  v.shape[d] = end - begin;
  return v;
}

TensorView TensorView::transpose(int d0, int d1) const {
  if (d0 < 0) d0 += ndim;
  if (d1 < 0) d1 += ndim;
  TensorView v = *this;
  std::swap(v.shape[d0], v.shape[d1]);
  std::swap(v.strides[d0], v.strides[d1]);
  return v;
}

std::string TensorView::shape_string() const {
  std::string s = "[";
  for (int d = 0; d < ndim; ++d) s += (d ? ", " : "") + std::to_string(shape[d]);
  return s + "]";
}

void Tensor::Free::operator()(void* p) const { device_free(device, p); }

Tensor::Tensor(DType dtype, std::span<const int64_t> shape, Device device) : Tensor(dtype, shape, device, true) {}

Tensor Tensor::uninitialized(DType dtype, std::span<const int64_t> shape, Device device) {
  return Tensor(dtype, shape, device, false);
}

Tensor::Tensor(DType dtype, std::span<const int64_t> shape, Device device, bool zero) {
  view_ = TensorView(nullptr, dtype, shape, device);
  size_t bytes = size_t(dtype_size(dtype));
  for (int64_t s : shape) {
    if (s < 0) throw Error("Tensor: negative dimension in shape " + view_.shape_string());
    if (__builtin_mul_overflow(bytes, size_t(s), &bytes) || bytes > (size_t(1) << 62))
      throw Error("Tensor: shape " + view_.shape_string() + " of " + std::string(dtype_name(dtype)) +
                  " is too large to allocate");
  }
  const size_t alloc = ((bytes + 63) / 64) * 64 + 64;  // never zero; rounded for aligned_alloc
  void* p = device_alloc(device, alloc);
  buf_ = std::unique_ptr<void, Free>(p, Free{device});
  if (zero) device_zero(device, p, alloc);
  view_.data = p;
}

}  // namespace kimi
