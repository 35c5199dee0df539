// Implementation of src/model/workspace.h.
#include "model/workspace.h"

#include <algorithm>
#include <string>

#include "kimi/error.h"

namespace kimi::model {

TensorView Workspace::alloc(DType dtype, std::initializer_list<int64_t> shape) {
  TensorView v(nullptr, dtype, shape, device_);
  const size_t bytes = size_t(v.numel()) * v.element_size();
  const size_t begin = (top_ + kAlign - 1) / kAlign * kAlign, end = begin + bytes;
  if (!measuring()) {
    if (end > capacity_)
      throw Error("forward: internal: the step needs more than the " + std::to_string(capacity_) +
                  " bytes its plan measured on " + to_string(device_) + " (" + v.shape_string() + " of " +
                  std::string(dtype_name(dtype)) + " at offset " + std::to_string(begin) + ")");
    v.data = base_ + begin;
  }
  top_ = end;
  peak_ = std::max(peak_, top_);
  return v;
}

}  // namespace kimi::model
