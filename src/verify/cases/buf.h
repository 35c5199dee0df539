// src/verify/cases/buf.h: owned test tensors with guard bytes, on any device.
//
// A Buf holds one tensor inside a larger allocation: kGuard bytes of 0xA5 before and after it, and
// (for padded layouts) 0xA5 in every gap between rows, so that an out-of-bounds or out-of-view write
// by an operator shows up in guards_ok(). Values are generated on the host from a seed and uploaded.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "kimi/device.h"
#include "kimi/tensor.h"

namespace kimi::verify {

inline constexpr size_t kGuard = 256;
inline constexpr uint8_t kGuardByte = 0xA5;

class Buf {
 public:
  // row_pad > 0 makes a strided view: every dimension but the last is laid out as if the last
  // dimension had row_pad more elements (a non-contiguous view with stride-1 rows).
  Buf(Device dev, DType dtype, std::vector<int64_t> shape, int64_t row_pad = 0);
  Buf(Buf&& o) noexcept { *this = std::move(o); }
  Buf& operator=(Buf&& o) noexcept;  // the moved-from Buf owns nothing
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  ~Buf();

  TensorView view() const { return view_; }
  operator TensorView() const { return view_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t numel() const { return view_.numel(); }

  // Logical elements in row-major order, as stored (after rounding to the dtype).
  std::vector<double> to_f64() const;
  std::vector<float> to_f32() const;
  // Sets logical elements from row-major values (rounded to the dtype).
  void set(const std::vector<float>& values);
  void set(const std::vector<double>& values);
  void set_ints(const std::vector<int64_t>& values);  // for i32/i64 buffers
  std::vector<int64_t> to_ints() const;
  // Uniform values in [lo, hi).
  Buf& uniform(std::mt19937_64& rng, double lo, double hi);
  // Guard bytes and row gaps still hold kGuardByte.
  bool guards_ok() const;

 private:
  std::vector<uint8_t> download() const;  // whole allocation
  void upload(const std::vector<uint8_t>& image);

  Device dev_;
  std::vector<int64_t> shape_;
  size_t bytes_ = 0;  // whole allocation
  void* base_ = nullptr;
  TensorView view_;
  std::vector<uint8_t> inside_;  // 1 where a byte belongs to the view
};

}  // namespace kimi::verify
