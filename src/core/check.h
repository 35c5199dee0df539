// src/core/check.h: argument validation shared by every operator.
//
// Each helper throws kimi::Error with "<op>: argument '<name>': expected <what>, got <actual>".
// Operators validate everything before they read or write any tensor.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "kimi/error.h"
#include "kimi/tensor.h"

namespace kimi::check {

// Wildcard for expect_shape: any size in that dimension.
inline constexpr int64_t kAny = -1;

class Checker {
 public:
  explicit Checker(std::string_view op) : op_(op) {}

  [[noreturn]] void fail(std::string_view arg, const std::string& expected, const std::string& got) const;
  [[noreturn]] void fail(const std::string& message) const;

  // Two views touch a common byte range (spans from the lowest to the highest addressed element;
  // conservative for interleaved strided views). Absent or empty views overlap nothing.
  static bool overlaps(const TensorView& a, const TensorView& b);
  // `t` is either exactly the view `other` (same data, dtype, shape, strides: in place) or disjoint from it.
  void same_or_disjoint(std::string_view arg, const TensorView& t, std::string_view other_arg,
                        const TensorView& other) const;
  // `t` shares no memory with `other` (an operator that reads `other` after writing `t`).
  void disjoint(std::string_view arg, const TensorView& t, std::string_view other_arg, const TensorView& other) const;

  // present, with the given number of dimensions
  void rank(std::string_view arg, const TensorView& t, int ndim) const;
  // present: data not null, 0 <= ndim <= 6, no negative extent.
  void present(std::string_view arg, const TensorView& t) const;
  void shape(std::string_view arg, const TensorView& t, std::initializer_list<int64_t> expected) const;
  void shape(std::string_view arg, const TensorView& t, const std::vector<int64_t>& expected) const;
  void dtype(std::string_view arg, const TensorView& t, std::initializer_list<DType> allowed) const;
  void float_dtype(std::string_view arg, const TensorView& t) const { dtype(arg, t, {DType::f32, DType::bf16, DType::f16}); }
  void device(std::string_view arg, const TensorView& t, Device d) const;
  void inner_contiguous(std::string_view arg, const TensorView& t) const;  // last dim stride 1
  // An activation: the given shape (kAny: free), f32/bf16/f16, stride 1 in the last dimension.
  void activation(std::string_view arg, const TensorView& t, const std::vector<int64_t>& expected) const {
    shape(arg, t, expected);
    float_dtype(arg, t);
    inner_contiguous(arg, t);
  }
  void contiguous(std::string_view arg, const TensorView& t) const;
  void no_negative_strides(std::string_view arg, const TensorView& t) const;
  // Every present tensor on one device; returns it.
  Device same_device(std::initializer_list<std::pair<std::string_view, const TensorView*>> ts) const;
  // cu_seqlens: i32/i64 [N+1], starts at 0, non-decreasing, ends at total. Returns the offsets.
  std::vector<int64_t> cu_seqlens(std::string_view arg, const TensorView& t, int64_t total) const;
  // An index tensor i32/i64 [n] readable on the host; returns its values.
  std::vector<int64_t> host_index(std::string_view arg, const TensorView& t, int64_t n) const;
  // Row slots into a pool of `pool` rows (the pool tensor is named `pool_arg`): i32/i64 [n] on the host,
  // each in [0, pool), pairwise distinct when `distinct` (rows written). Absent: rows 0..n-1 (n <= pool).
  std::vector<int64_t> slots(std::string_view arg, const TensorView& t, int64_t n, std::string_view pool_arg,
                             int64_t pool, bool distinct) const;
  // The device form of an index argument (src/core/index.h): true when t is an i32/i64 [n] tensor on a CUDA device,
  // which must then be `dev` (the operator's device); its values are not read. False for a host tensor or an absent
  // one (the caller reads those with host_index / slots).
  bool device_index(std::string_view arg, const TensorView& t, int64_t n, Device dev) const;
  // A positive / in-range integer parameter.
  void range(std::string_view arg, int64_t value, int64_t lo, int64_t hi) const;

  const std::string& op() const { return op_; }

 private:
  std::string op_;
};

std::string shape_string(const std::vector<int64_t>& s);  // "[2, 3, ?]" (kAny prints ?)

// The shape of t as a vector (for Checker::shape("y", y, dims(x))).
inline std::vector<int64_t> dims(const TensorView& t) { return {t.shape.begin(), t.shape.begin() + t.ndim}; }

// Reads an i32/i64 CPU index tensor element as int64.
int64_t load_index(const TensorView& t, int64_t i);

}  // namespace kimi::check

namespace kimi {
struct Weight;
struct KdaGate;
namespace check {
// A dense [out, in] (f32/bf16/f16) or MXFP4 (packed u8 [out, in/2] + scale u8 [out, in/32]) weight;
// kAny leaves a size free. Defined in src/ops/linear.cpp.
void weight(const Checker& c, std::string_view arg, const Weight& w, int64_t out, int64_t in);
// A short-conv weight [C, W] or [C, 1, W], float, W in [1, 8], named `arg`; returns W. src/ops/conv.cpp.
int64_t conv_weight(const Checker& c, std::string_view arg, const TensorView& w, int64_t channels);
// The fused KDA gate's parameters for H heads of K channels (A_log f32 [H], dt_bias f32 [H*K] or [H, K],
// lower_bound finite <= 0 for the bounded form). src/ops/kda.cpp.
void kda_gate(const Checker& c, const KdaGate& gate, int64_t H, int64_t K);
}  // namespace check
}  // namespace kimi
