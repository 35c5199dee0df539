// src/core/index.h: an index argument (rows, slots, lengths, start positions) as a backend receives it.
//
// The public operators take index arguments as i32/i64 [n] tensors. The operator resolves one into an Index:
//   host    the values, read and checked on the host (a CPU tensor; an absent argument already resolved by the
//           operator to its default). Every backend takes this form.
//   device  the tensor itself, on the operator's CUDA device: the kernels read it, the host never does, so the call
//           can be captured in a CUDA graph and replayed with new values written into the same tensor. Its dtype and
//           shape are checked, its values are not: each operator documents what an out-of-range value does (never a
//           read or write out of bounds). Only CUDA backends receive it (src/ops route a CPU call with a CUDA index
//           tensor to the usual device-mismatch error).
#pragma once

#include <cstdint>
#include <vector>

#include "kimi/tensor.h"

namespace kimi {

struct Index {
  std::vector<int64_t> host;  // the values (host form)
  TensorView device;          // i32/i64 [n] on the operator's CUDA device (device form), else absent
  bool on_device() const { return device.present(); }
  int64_t size() const { return on_device() ? device.size(0) : int64_t(host.size()); }
};

}  // namespace kimi
