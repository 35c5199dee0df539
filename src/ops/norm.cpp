// kimi/ops/norm.h: validation and dispatch.
#include "kimi/ops/norm.h"

#include "core/check.h"
#include "core/registry.h"

namespace kimi {

namespace {
using check::dims;

// x: [..., D] float, last stride 1; w: [D]; y like x.
void check_rows(const check::Checker& c, const char* xn, const TensorView& x, const char* yn, const TensorView& y) {
  c.present(xn, x);
  if (x.ndim < 1) c.fail(xn, "at least 1 dimension", "0");
  c.float_dtype(xn, x);
  c.inner_contiguous(xn, x);
  c.shape(yn, y, dims(x));
  c.float_dtype(yn, y);
  c.inner_contiguous(yn, y);
}

void check_weight(const check::Checker& c, const TensorView& w, int64_t d) {
  c.shape("w", w, {d});
  c.float_dtype("w", w);
  c.inner_contiguous("w", w);
}

void check_eps(const check::Checker& c, float eps) {
  if (!(eps >= 0.f)) c.fail("eps", "a value >= 0", std::to_string(eps));
}
}  // namespace

void rms_norm(TensorView x, TensorView w, float eps, TensorView y, const Context& ctx) {
  check::Checker c("rms_norm");
  check_rows(c, "x", x, "y", y);
  check_weight(c, w, x.size(-1));
  check_eps(c, eps);
  const Device dev = c.same_device({{"x", &x}, {"w", &w}, {"y", &y}});
  dispatch(c, dev, registry().rms_norm, x, w, eps, y, ctx);
}

void add_rms_norm(TensorView x, TensorView residual, TensorView w, float eps, TensorView sum, TensorView y,
                  const Context& ctx) {
  check::Checker c("add_rms_norm");
  check_rows(c, "x", x, "y", y);
  c.shape("residual", residual, dims(x));
  c.float_dtype("residual", residual);
  c.inner_contiguous("residual", residual);
  c.shape("sum", sum, dims(x));
  c.float_dtype("sum", sum);
  c.inner_contiguous("sum", sum);
  check_weight(c, w, x.size(-1));
  check_eps(c, eps);
  const Device dev = c.same_device({{"x", &x}, {"residual", &residual}, {"w", &w}, {"sum", &sum}, {"y", &y}});
  dispatch(c, dev, registry().add_rms_norm, x, residual, w, eps, sum, y, ctx);
}

void gated_rms_norm(TensorView o, TensorView z, TensorView w, float eps, TensorView y, const Context& ctx) {
  check::Checker c("gated_rms_norm");
  check_rows(c, "o", o, "y", y);
  if (z.present()) {
    c.shape("z", z, dims(o));
    c.float_dtype("z", z);
    c.inner_contiguous("z", z);
  }
  check_weight(c, w, o.size(-1));
  check_eps(c, eps);
  const Device dev = c.same_device({{"o", &o}, {"z", &z}, {"w", &w}, {"y", &y}});
  dispatch(c, dev, registry().gated_rms_norm, o, z, w, eps, y, ctx);
}

void l2_norm(TensorView x, TensorView y, float eps, const Context& ctx) {
  check::Checker c("l2_norm");
  check_rows(c, "x", x, "y", y);
  check_eps(c, eps);
  const Device dev = c.same_device({{"x", &x}, {"y", &y}});
  dispatch(c, dev, registry().l2_norm, x, y, eps, ctx);
}

}  // namespace kimi
