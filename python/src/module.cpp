// python/src/module.cpp: the extension module kimi_cpp._C.
//
// Low-level, out-style functions named like the C++ API: every output is allocated by the caller (the Python
// package, in the caller's framework) and passed in; nothing here allocates a framework tensor. Every
// function takes `stream` (a cudaStream_t as an integer; the Python layer passes the caller's current
// stream) and releases the GIL while the operator runs. kimi::Error becomes kimi_cpp.Error, a ValueError
// subclass, with its message intact. The Pythonic API is the kimi_cpp package (python/kimi_cpp).
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "kimi/device.h"
#include "kimi/error.h"
#include "view.h"

namespace nb = nanobind;

NB_MODULE(_C, m) {
  m.doc() = "kimi.cpp operators over DLPack (low level; use the kimi_cpp package)";
  nb::exception<kimi::Error>(m, "Error", PyExc_ValueError);

  m.def("cuda_built", &kimi::cuda_built, "Whether the CUDA backend was compiled in.");
  m.def("cuda_device_count", &kimi::cuda_device_count, "CUDA devices the backend sees (0 without it).");
  m.def("all_ops", &kimi::all_ops, "Every operator name of the C++ API.");
  m.def(
      "op_supported",
      [](const std::string& op, const std::string& device, int index) {
        if (device != "cpu" && device != "cuda")
          throw kimi::Error("op_supported: argument 'device': expected 'cpu' or 'cuda', got '" + device + "'");
        return kimi::op_supported(op, device == "cpu" ? kimi::Device::cpu() : kimi::Device::cuda(index));
      },
      nb::arg("op"), nb::arg("device"), nb::arg("index") = 0,
      "Whether operator `op` has an implementation on the backend of `device` ('cpu' or 'cuda').");
  m.def("set_num_threads", &kimi::py::set_cpu_threads, nb::arg("n"),
        "CPU threads per operator (0 = OpenMP's default).");
  m.def("get_num_threads", &kimi::py::cpu_threads);

  kimi::py::bind_kda(m);
  kimi::py::bind_norm(m);
  kimi::py::bind_layers(m);
  kimi::py::bind_moe(m);
  kimi::py::bind_attention(m);
}
