// python/src/bind_layers.cpp: linear (dense / MXFP4), MXFP4 dequant / quant, short conv, row gather
// (include/kimi/ops/linear.h, mxfp4.h, conv.h, gather.h).
#include <nanobind/stl/optional.h>

#include "kimi/ops/conv.h"
#include "kimi/ops/gather.h"
#include "kimi/ops/linear.h"
#include "kimi/ops/mxfp4.h"
#include "view.h"

namespace kimi::py {

void bind_layers(nb::module_& m) {
  m.def(
      "gather_rows",
      [](const Array& src, const Array& rows, const Array& out, uintptr_t stream) {
        const char* op = "gather_rows";
        const TensorView sv = view(op, "src", src), rv = view(op, "rows", rows), ov = view(op, "out", out);
        const Context ctx = context(stream);
        run([&] { kimi::gather_rows(sv, rv, ov, ctx); });
      },
      nb::arg("src"), nb::arg("rows"), nb::arg("out"), nb::arg("stream") = 0);

  m.def(
      "linear",
      [](const Array& x, const Array& w, const OptArray& scale, const Array& y, float beta, uintptr_t stream) {
        const TensorView xv = view("linear", "x", x), yv = view("linear", "y", y);
        const Weight wt = weight("linear", "w", w, scale);
        const Context ctx = context(stream);
        run([&] { kimi::linear(xv, wt, yv, beta, ctx); });
      },
      nb::arg("x"), nb::arg("w"), nb::arg("scale").none(), nb::arg("y"), nb::arg("beta") = 0.f, nb::arg("stream") = 0);

  m.def(
      "mxfp4_dequant",
      [](const Array& packed, const Array& scale, const Array& w, uintptr_t stream) {
        const char* op = "mxfp4_dequant";
        const TensorView pv = view(op, "packed", packed), sv = view(op, "scale", scale), wv = view(op, "w", w);
        const Context ctx = context(stream);
        run([&] { kimi::mxfp4_dequant(pv, sv, wv, ctx); });
      },
      nb::arg("packed"), nb::arg("scale"), nb::arg("w"), nb::arg("stream") = 0);

  m.def(
      "mxfp4_quant",
      [](const Array& w, const Array& packed, const Array& scale, uintptr_t stream) {
        const char* op = "mxfp4_quant";
        const TensorView wv = view(op, "w", w), pv = view(op, "packed", packed), sv = view(op, "scale", scale);
        const Context ctx = context(stream);
        run([&] { kimi::mxfp4_quant(wv, pv, sv, ctx); });
      },
      nb::arg("w"), nb::arg("packed"), nb::arg("scale"), nb::arg("stream") = 0);

  m.def(
      "short_conv_fwd",
      [](const Array& x, const Array& w, const OptArray& cache_in, const OptArray& cache_out,
         const OptArray& cu_seqlens, const OptArray& cache_slots, bool silu, const Array& y, uintptr_t stream) {
        const char* op = "short_conv_fwd";
        const TensorView xv = view(op, "x", x), wv = view(op, "w", w), ci = view(op, "cache_in", cache_in),
                         co = view(op, "cache_out", cache_out), cu = view(op, "cu_seqlens", cu_seqlens),
                         sl = view(op, "cache_slots", cache_slots), yv = view(op, "y", y);
        const Context ctx = context(stream);
        const ConvActivation act = silu ? ConvActivation::silu : ConvActivation::none;
        run([&] { kimi::short_conv_fwd(xv, wv, ci, co, cu, sl, act, yv, ctx); });
      },
      nb::arg("x"), nb::arg("w"), nb::arg("cache_in").none(), nb::arg("cache_out").none(),
      nb::arg("cu_seqlens").none(), nb::arg("cache_slots").none(), nb::arg("silu"), nb::arg("y"),
      nb::arg("stream") = 0);

  m.def(
      "short_conv_update",
      [](const Array& x, const Array& w, const OptArray& cache, const OptArray& cache_slots, bool silu,
         const Array& y, uintptr_t stream) {
        const char* op = "short_conv_update";
        const TensorView xv = view(op, "x", x), wv = view(op, "w", w), cv = view(op, "cache", cache),
                         sv = view(op, "cache_slots", cache_slots), yv = view(op, "y", y);
        const Context ctx = context(stream);
        const ConvActivation act = silu ? ConvActivation::silu : ConvActivation::none;
        run([&] { kimi::short_conv_update(xv, wv, cv, sv, act, yv, ctx); });
      },
      nb::arg("x"), nb::arg("w"), nb::arg("cache").none(), nb::arg("cache_slots").none(), nb::arg("silu"),
      nb::arg("y"), nb::arg("stream") = 0);
}

}  // namespace kimi::py
