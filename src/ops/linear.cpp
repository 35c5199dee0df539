// kimi/ops/linear.h: validation and dispatch.
#include "kimi/ops/linear.h"

#include <optional>
#include <string>

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

namespace {

// linear's checks of one projection, the arguments named prefix + "x", prefix + "w", ...
void check_projection(const check::Checker& c, const std::string& prefix, const TensorView& x, const Weight& w,
                      const TensorView& y, float beta) {
  const std::string xa = prefix + "x", ya = prefix + "y";
  c.rank(xa, x, 2);
  c.float_dtype(xa, x);
  c.inner_contiguous(xa, x);
  check::weight(c, prefix + "w", w, check::kAny, x.size(1));
  c.shape(ya, y, {x.size(0), w.out_features()});
  c.float_dtype(ya, y);
  c.inner_contiguous(ya, y);
  // y rows are written by several threads: they must not overlap.
  if (y.size(0) > 1 && y.stride(0) < y.size(1))
    c.fail(ya, "non-overlapping rows (stride(0) >= " + std::to_string(y.size(1)) + ")",
           "stride(0) " + std::to_string(y.stride(0)));
  c.disjoint(ya, y, xa, x);  // the fused path reads x rows after writing y rows
  if (beta != 0.f && beta != 1.f) c.fail(prefix + "beta", "0 or 1", std::to_string(beta));
}

}  // namespace

void linear(TensorView x, const Weight& w, TensorView y, float beta, const Context& ctx) {
  check::Checker c("linear");
  check_projection(c, "", x, w, y, beta);
  const Device dev = c.same_device({{"x", &x}, {"w.w", &w.w}, {"w.scale", &w.scale}, {"y", &y}});
  dispatch(c, dev, registry().linear, x, w, y, beta, ctx);
}

void linear_many(std::span<const LinearJob> jobs, const Context& ctx) {
  check::Checker c("linear_many");
  if (jobs.empty()) return;
  std::optional<Device> dev;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const LinearJob& j = jobs[i];
    const std::string p = "jobs[" + std::to_string(i) + "].";
    check_projection(c, p, j.x, j.w, j.y, j.beta);
    const std::string xa = p + "x", wa = p + "w.w", sa = p + "w.scale", ya = p + "y";
    const Device d = c.same_device({{xa, &j.x}, {wa, &j.w.w}, {sa, &j.w.scale}, {ya, &j.y}});
    if (!dev) dev = d;
    else if (d != *dev) c.fail(xa, "the device of jobs[0] (" + to_string(*dev) + ")", to_string(d));
    for (size_t k = 0; k < jobs.size(); ++k) {
      if (k == i) continue;
      const std::string q = "jobs[" + std::to_string(k) + "].";
      c.disjoint(ya, j.y, q + "x", jobs[k].x);
      c.disjoint(ya, j.y, q + "y", jobs[k].y);
    }
  }
  dispatch(c, *dev, registry().linear_many, jobs, ctx);
}

}  // namespace kimi
