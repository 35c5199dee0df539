// python/src/bind_norm.cpp: norms (include/kimi/ops/norm.h).
#include <nanobind/stl/optional.h>

#include "kimi/ops/norm.h"
#include "view.h"

namespace kimi::py {

void bind_norm(nb::module_& m) {
  m.def(
      "rms_norm",
      [](const Array& x, const Array& w, float eps, const Array& y, uintptr_t stream) {
        const TensorView xv = view("rms_norm", "x", x), wv = view("rms_norm", "w", w), yv = view("rms_norm", "y", y);
        const Context ctx = context(stream);
        run([&] { kimi::rms_norm(xv, wv, eps, yv, ctx); });
      },
      nb::arg("x"), nb::arg("w"), nb::arg("eps"), nb::arg("y"), nb::arg("stream") = 0);

  m.def(
      "add_rms_norm",
      [](const Array& x, const Array& residual, const Array& w, float eps, const Array& sum, const Array& y,
         uintptr_t stream) {
        const char* op = "add_rms_norm";
        const TensorView xv = view(op, "x", x), rv = view(op, "residual", residual), wv = view(op, "w", w),
                         sv = view(op, "sum", sum), yv = view(op, "y", y);
        const Context ctx = context(stream);
        run([&] { kimi::add_rms_norm(xv, rv, wv, eps, sv, yv, ctx); });
      },
      nb::arg("x"), nb::arg("residual"), nb::arg("w"), nb::arg("eps"), nb::arg("sum"), nb::arg("y"),
      nb::arg("stream") = 0);

  m.def(
      "gated_rms_norm",
      [](const Array& o, const OptArray& z, const Array& w, float eps, const Array& y, uintptr_t stream) {
        const char* op = "gated_rms_norm";
        const TensorView ov = view(op, "o", o), zv = view(op, "z", z), wv = view(op, "w", w), yv = view(op, "y", y);
        const Context ctx = context(stream);
        run([&] { kimi::gated_rms_norm(ov, zv, wv, eps, yv, ctx); });
      },
      nb::arg("o"), nb::arg("z").none(), nb::arg("w"), nb::arg("eps"), nb::arg("y"), nb::arg("stream") = 0);

  m.def(
      "l2_norm",
      [](const Array& x, const Array& y, float eps, uintptr_t stream) {
        const TensorView xv = view("l2_norm", "x", x), yv = view("l2_norm", "y", y);
        const Context ctx = context(stream);
        run([&] { kimi::l2_norm(xv, yv, eps, ctx); });
      },
      nb::arg("x"), nb::arg("y"), nb::arg("eps") = 1e-6f, nb::arg("stream") = 0);
}

}  // namespace kimi::py
