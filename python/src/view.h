// python/src/view.h: the binding layer's one conversion: a nanobind ndarray (any DLPack producer: PyTorch,
// NumPy, CuPy, JAX...; CPU or CUDA) as a kimi::TensorView, without a copy.
//
// DLPack maps one to one onto TensorView (include/kimi/tensor.h): data (nanobind has applied byte_offset),
// dtype, device, shape, strides in elements. dtypes: float32 / bfloat16 / float16 / uint8 / int32 / int64.
// Devices: CPU (and CUDA-pinned host memory, which the host reads directly) and CUDA. Anything else raises
// kimi_cpp.Error naming the operator and the argument. Python None is an absent view (optional arguments).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "kimi/context.h"
#include "kimi/ops/linear.h"
#include "kimi/tensor.h"

namespace kimi::py {

namespace nb = nanobind;

using Array = nb::ndarray<>;
using OptArray = std::optional<Array>;

TensorView view(const char* op, const char* arg, const Array& a);
TensorView view(const char* op, const char* arg, const OptArray& a);  // None -> absent

// A Linear weight: dense [out, in] (scale None), or MXFP4 packed u8 [out, in/2] + scale u8 [out, in/32].
Weight weight(const char* op, const char* arg, const OptArray& w, const OptArray& scale);

// The Context of one call: the caller's CUDA stream (a cudaStream_t as an integer, 0 = the legacy default
// stream) and the module-wide CPU thread count (set_num_threads).
Context context(uintptr_t stream);
void set_cpu_threads(int n);
int cpu_threads();

// Runs an operator with the GIL released: kernels touch no Python object, and other Python threads run.
template <class F>
void run(F&& f) {
  nb::gil_scoped_release release;
  std::forward<F>(f)();
}

// One registration function per operator family (bind_*.cpp).
void bind_kda(nb::module_& m);
void bind_norm(nb::module_& m);
void bind_layers(nb::module_& m);  // linear, MXFP4, short conv
void bind_moe(nb::module_& m);
void bind_attention(nb::module_& m);  // MLA, AttnRes

}  // namespace kimi::py
