// kimi/ops/linear.h: validation and dispatch.
#include "kimi/ops/linear.h"

#include "core/check.h"
#include "core/registry.h"

namespace kimi {

void check::weight(const Checker& c, std::string_view arg, const Weight& w, int64_t out, int64_t in) {
  const std::string a(arg);
  if (w.is_mxfp4()) {
    c.rank(a + ".w", w.w, 2);
    c.dtype(a + ".w", w.w, {DType::u8});
    c.inner_contiguous(a + ".w", w.w);
    c.dtype(a + ".scale", w.scale, {DType::u8});
    c.inner_contiguous(a + ".scale", w.scale);
    const int64_t i = w.w.size(1) * 2;
    if (i % 32) c.fail(a + ".w", "MXFP4 input features (2 * packed columns) divisible by 32", std::to_string(i));
    c.shape(a + ".scale", w.scale, {w.w.size(0), i / 32});
  } else {
    c.rank(a + ".w", w.w, 2);
    c.float_dtype(a + ".w", w.w);
    c.inner_contiguous(a + ".w", w.w);
  }
  if (in != check::kAny && w.is_mxfp4() && in % 2 != 0)
    c.fail(a + ".w", "an MXFP4 weight matching " + std::to_string(in) + " input features (MXFP4 needs a multiple of 32)",
           w.w.shape_string() + " (" + std::to_string(w.in_features()) + " input features)");
  c.shape(a + ".w", w.w, {out, in == check::kAny ? check::kAny : (w.is_mxfp4() ? in / 2 : in)});
}

void linear(TensorView x, const Weight& w, TensorView y, float beta, const Context& ctx) {
  check::Checker c("linear");
  c.rank("x", x, 2);
  c.float_dtype("x", x);
  c.inner_contiguous("x", x);
  check::weight(c, "w", w, check::kAny, x.size(1));
  c.shape("y", y, {x.size(0), w.out_features()});
  c.float_dtype("y", y);
  c.inner_contiguous("y", y);
  // y rows are written by several threads: they must not overlap.
  if (y.size(0) > 1 && y.stride(0) < y.size(1))
    c.fail("y", "non-overlapping rows (stride(0) >= " + std::to_string(y.size(1)) + ")",
           "stride(0) " + std::to_string(y.stride(0)));
  c.disjoint("y", y, "x", x);  // the fused path reads x rows after writing y rows
  if (beta != 0.f && beta != 1.f) c.fail("beta", "0 or 1", std::to_string(beta));
  const Device dev = c.same_device({{"x", &x}, {"w.w", &w.w}, {"w.scale", &w.scale}, {"y", &y}});
  dispatch(c, dev, registry().linear, x, w, y, beta, ctx);
}

}  // namespace kimi
