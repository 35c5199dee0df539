// kimi/tensor.h: the tensor types of the public API.
//
// TensorView is a non-owning view: a data pointer, a dtype, a device, a shape and strides counted in
// ELEMENTS (not bytes), row-major by default. It maps one-to-one onto DLPack's DLTensor (data, device,
// ndim, dtype, shape, strides in elements, byte_offset 0). A default-constructed view is "absent":
// operators take absent views for optional arguments (no initial state, no cu_seqlens, ...).
//
// Tensor owns a zero-initialised (or, from Tensor::uninitialized, unfilled), contiguous buffer on one device
// (64-byte-aligned host memory by default, or CUDA device memory) and hands out views of it. Memory owned elsewhere (a framework's
// tensor, a memory-mapped checkpoint) is reached through views with the same constructors.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kimi/dtype.h"

namespace kimi {

enum class DeviceType : uint8_t { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;
  static constexpr Device cpu() { return {DeviceType::cpu, 0}; }
  static constexpr Device cuda(int i = 0) { return {DeviceType::cuda, i}; }
  friend constexpr bool operator==(Device a, Device b) = default;
};

std::string to_string(Device d);

inline constexpr int kMaxDims = 6;

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::f32;
  Device device{};
  int ndim = 0;
  std::array<int64_t, kMaxDims> shape{};    // shape[0..ndim)
  std::array<int64_t, kMaxDims> strides{};  // in elements

  TensorView() = default;
  // Row-major contiguous view.
  TensorView(void* data, DType dtype, std::span<const int64_t> shape, Device device = Device::cpu());
  TensorView(void* data, DType dtype, std::initializer_list<int64_t> shape, Device device = Device::cpu())
      : TensorView(data, dtype, std::span<const int64_t>(shape.begin(), shape.size()), device) {}
  // Strided view (strides in elements, may be any non-negative values).
  TensorView(void* data, DType dtype, std::span<const int64_t> shape, std::span<const int64_t> strides,
             Device device = Device::cpu());

  bool present() const { return data != nullptr; }
  int64_t size(int d) const { return shape[d < 0 ? d + ndim : d]; }
  int64_t stride(int d) const { return strides[d < 0 ? d + ndim : d]; }
  int64_t numel() const;
  bool is_contiguous() const;
  size_t element_size() const { return size_t(dtype_size(dtype)); }
  // Pointer to element with the given multi-index (no bounds check).
  void* at(std::initializer_list<int64_t> idx) const;
  // Same data with a new shape; requires a contiguous view.
  TensorView reshape(std::initializer_list<int64_t> new_shape) const;
  // Sub-range [begin, end) of dimension d.
  TensorView slice(int d, int64_t begin, int64_t end) const;
  // Swap two dimensions (strides follow).
  TensorView transpose(int d0, int d1) const;
  std::string shape_string() const;  // "[2, 3, 4]"
};

// Owning, zero-initialised, contiguous tensor on `device` (host memory is 64-byte aligned; CUDA memory
// comes from cudaMalloc and is zeroed before the constructor returns).
class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, std::span<const int64_t> shape, Device device = Device::cpu());
  Tensor(DType dtype, std::initializer_list<int64_t> shape, Device device = Device::cpu())
      : Tensor(dtype, std::span<const int64_t>(shape.begin(), shape.size()), device) {}
  // The same allocation WITHOUT the zero fill: the contents are undefined until written. For buffers that are
  // always overwritten before they are read (the model's activation arena), where the fill (on CUDA a
  // cudaMemset and a stream synchronization) is pure cost. The constructors above still zero-fill.
  static Tensor uninitialized(DType dtype, std::span<const int64_t> shape, Device device = Device::cpu());
  static Tensor uninitialized(DType dtype, std::initializer_list<int64_t> shape, Device device = Device::cpu()) {
    return uninitialized(dtype, std::span<const int64_t>(shape.begin(), shape.size()), device);
  }

  TensorView view() const { return view_; }
  operator TensorView() const { return view_; }
  void* data() const { return view_.data; }
  template <class T>
  T* data_as() const { return static_cast<T*>(view_.data); }
  int64_t numel() const { return view_.numel(); }
  size_t nbytes() const { return size_t(numel()) * view_.element_size(); }
  Device device() const { return view_.device; }

 private:
  struct Free {
    Device device;
    void operator()(void* p) const;
  };
  Tensor(DType dtype, std::span<const int64_t> shape, Device device, bool zero);
  std::unique_ptr<void, Free> buf_;
  TensorView view_;
};

}  // namespace kimi
