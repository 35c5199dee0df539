// Implementation of src/verify/cases/buf.h.
#include "verify/cases/buf.h"

#include <cstring>
#include <stdexcept>
#include <utility>

namespace kimi::verify {

namespace {
// Byte offsets (from the view's start) of every logical element, row-major.
std::vector<int64_t> element_offsets(const TensorView& v) {
  const int64_t n = v.numel();
  std::vector<int64_t> offs(static_cast<size_t>(n));
  std::vector<int64_t> idx(size_t(v.ndim), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (int d = 0; d < v.ndim; ++d) off += idx[size_t(d)] * v.strides[d];
    offs[size_t(i)] = off * int64_t(v.element_size());
    for (int d = v.ndim - 1; d >= 0; --d) {
      if (++idx[size_t(d)] < v.shape[d]) break;
      idx[size_t(d)] = 0;
    }
  }
  return offs;
}
}  // namespace

Buf::Buf(Device dev, DType dtype, std::vector<int64_t> shape, int64_t row_pad) : dev_(dev), shape_(std::move(shape)) {
  const int nd = int(shape_.size());
  std::vector<int64_t> strides(shape_.size());
  int64_t s = 1;
  for (int d = nd - 1; d >= 0; --d) {
    strides[size_t(d)] = s;
    s *= shape_[size_t(d)] + (d == nd - 1 ? row_pad : 0);
  }
  const size_t span_bytes = size_t(s) * size_t(dtype_size(dtype));
  bytes_ = span_bytes + 2 * kGuard;
  base_ = device_alloc(dev_, bytes_);
  view_ = TensorView(static_cast<char*>(base_) + kGuard, dtype, shape_, strides, dev_);
  inside_.assign(bytes_, 0);
  const int64_t es = int64_t(view_.element_size());
  for (int64_t off : element_offsets(view_))
    for (int64_t b = 0; b < es; ++b) inside_[size_t(int64_t(kGuard) + off + b)] = 1;
  std::vector<uint8_t> image(bytes_, kGuardByte);
  for (size_t i = 0; i < bytes_; ++i)
    if (inside_[i]) image[i] = 0;
  upload(image);
}

Buf& Buf::operator=(Buf&& o) noexcept {
  if (this != &o) {
    if (base_) device_free(dev_, base_);
    dev_ = o.dev_;
    shape_ = std::move(o.shape_);
    bytes_ = o.bytes_;
    base_ = std::exchange(o.base_, nullptr);
    view_ = o.view_;
    inside_ = std::move(o.inside_);
  }
  return *this;
}

Buf::~Buf() {
  if (base_) device_free(dev_, base_);
}

std::vector<uint8_t> Buf::download() const {
  std::vector<uint8_t> image(bytes_);
  TensorView src(base_, DType::u8, {int64_t(bytes_)}, dev_);
  copy(TensorView(image.data(), DType::u8, {int64_t(bytes_)}), src);
  return image;
}

void Buf::upload(const std::vector<uint8_t>& image) {
  TensorView dst(base_, DType::u8, {int64_t(bytes_)}, dev_);
  copy(dst, TensorView(const_cast<uint8_t*>(image.data()), DType::u8, {int64_t(bytes_)}));
}

std::vector<double> Buf::to_f64() const {
  const auto image = download();
  const auto offs = element_offsets(view_);
  std::vector<double> out(offs.size());
  for (size_t i = 0; i < offs.size(); ++i) out[i] = load_as_f32(image.data() + kGuard + offs[i], view_.dtype, 0);
  return out;
}

std::vector<float> Buf::to_f32() const {
  const auto d = to_f64();
  return std::vector<float>(d.begin(), d.end());
}

void Buf::set(const std::vector<float>& values) {
  const auto offs = element_offsets(view_);
  if (values.size() != offs.size()) throw std::runtime_error("Buf::set: wrong number of values");
  auto image = download();
  for (size_t i = 0; i < offs.size(); ++i) store_from_f32(image.data() + kGuard + offs[i], view_.dtype, 0, values[i]);
  upload(image);
}

void Buf::set(const std::vector<double>& values) { set(std::vector<float>(values.begin(), values.end())); }

void Buf::set_ints(const std::vector<int64_t>& values) {
  const auto offs = element_offsets(view_);
  if (values.size() != offs.size()) throw std::runtime_error("Buf::set_ints: wrong number of values");
  auto image = download();
  for (size_t i = 0; i < offs.size(); ++i) {
    uint8_t* p = image.data() + kGuard + offs[i];
    if (view_.dtype == DType::i64) {
      std::memcpy(p, &values[i], 8);
    } else if (view_.dtype == DType::i32) {
      const int32_t v = int32_t(values[i]);
      std::memcpy(p, &v, 4);
    } else {
      store_from_f32(p, view_.dtype, 0, float(values[i]));
    }
  }
  upload(image);
}

std::vector<int64_t> Buf::to_ints() const {
  const auto image = download();
  const auto offs = element_offsets(view_);
  std::vector<int64_t> out(offs.size());
  for (size_t i = 0; i < offs.size(); ++i) {
    const uint8_t* p = image.data() + kGuard + offs[i];
    if (view_.dtype == DType::i64) {
      std::memcpy(&out[i], p, 8);
    } else if (view_.dtype == DType::i32) {
      int32_t v;
      std::memcpy(&v, p, 4);
      out[i] = v;
    } else {
      out[i] = int64_t(load_as_f32(p, view_.dtype, 0));
    }
  }
  return out;
}

Buf& Buf::uniform(std::mt19937_64& rng, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(numel()));
  for (auto& x : v) x = float(dist(rng));
  set(v);
  return *this;
}

bool Buf::guards_ok() const {
  const auto image = download();
  for (size_t i = 0; i < bytes_; ++i)
    if (!inside_[i] && image[i] != kGuardByte) return false;
  return true;
}

}  // namespace kimi::verify
