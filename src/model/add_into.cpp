// Implementation of src/model/add_into.h: checks the views, then the kernel of their device's backend
// (src/cpu/add_into.cpp, src/cuda/model/add_into.cu) through the registry.
#include "model/add_into.h"

#include <string>

#include "core/registry.h"
#include "kimi/error.h"

namespace kimi::model {

void add_into(TensorView out, TensorView y, const Context& ctx) {
  const int64_t T = y.size(0), d = y.size(1);
  if (out.dtype != DType::f32 || y.dtype != DType::f32 || out.ndim != 2 || out.size(0) != T || out.size(1) != d ||
      out.stride(1) != 1 || !y.is_contiguous() || out.device != y.device)
    throw Error("add_into: internal: expected f32 [T, d] views on one device, got out " + out.shape_string() + " on " +
                to_string(out.device) + " and y " + y.shape_string() + " on " + to_string(y.device));
  dispatch(check::Checker("add_into"), out.device, registry().add_into, out, y, ctx);
}

}  // namespace kimi::model
