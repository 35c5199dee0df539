// Implementation of src/model/add_into.h: a host loop, or the CUDA kernel of src/cuda/model/add_into.cu.
#include "model/add_into.h"

#include <string>

#include "kimi/error.h"
#ifdef KIMI_WITH_CUDA
#include "cuda/model/add_into.h"
#endif

namespace kimi::model {

void add_into(TensorView out, TensorView y, const Context& ctx) {
  const int64_t T = y.size(0), d = y.size(1);
  if (out.dtype != DType::f32 || y.dtype != DType::f32 || out.ndim != 2 || out.size(0) != T || out.size(1) != d ||
      out.stride(1) != 1 || !y.is_contiguous() || out.device != y.device)
    throw Error("add_into: internal: expected f32 [T, d] views on one device, got out " + out.shape_string() + " on " +
                to_string(out.device) + " and y " + y.shape_string() + " on " + to_string(y.device));
  if (out.device.type == DeviceType::cpu) {
    float* o = static_cast<float*>(out.data);
    const float* p = static_cast<const float*>(y.data);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < d; ++i) o[t * out.stride(0) + i] += p[t * d + i];
    return;
  }
#ifdef KIMI_WITH_CUDA
  cuda::add_into(out, y, ctx);
#else
  (void)ctx;
  throw Error("add_into: " + to_string(out.device) + " tensors but this build has no CUDA backend");
#endif
}

}  // namespace kimi::model
