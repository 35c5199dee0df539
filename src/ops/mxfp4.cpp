// kimi/ops/mxfp4.h: validation and dispatch.
#include "kimi/ops/mxfp4.h"

#include "core/check.h"
#include "core/registry.h"

namespace kimi {

namespace {
// An output written by several threads: its rows must not overlap.
void distinct_rows(const check::Checker& c, const char* arg, const TensorView& t) {
  if (t.size(0) > 1 && t.stride(0) < t.size(1))
    c.fail(arg, "non-overlapping rows (stride(0) >= " + std::to_string(t.size(1)) + ")",
           "stride(0) " + std::to_string(t.stride(0)));
}

// w: float [O, I] with I % 32 == 0; packed u8 [O, I/2]; scale u8 [O, I/32]; every last dim stride 1.
void check_mxfp4(const check::Checker& c, const TensorView& packed, const TensorView& scale, const TensorView& w) {
  c.rank("w", w, 2);
  c.float_dtype("w", w);
  c.inner_contiguous("w", w);
  const int64_t o = w.size(0), i = w.size(1);
  if (i % 32) c.fail("w", "input features (dimension 1) divisible by 32", std::to_string(i));
  c.rank("packed", packed, 2);
  c.dtype("packed", packed, {DType::u8});
  c.shape("packed", packed, {o, i / 2});
  c.inner_contiguous("packed", packed);
  c.rank("scale", scale, 2);
  c.dtype("scale", scale, {DType::u8});
  c.shape("scale", scale, {o, i / 32});
  c.inner_contiguous("scale", scale);
}
}  // namespace

void mxfp4_dequant(TensorView packed, TensorView scale, TensorView w, const Context& ctx) {
  check::Checker c("mxfp4_dequant");
  check_mxfp4(c, packed, scale, w);
  distinct_rows(c, "w", w);
  const Device dev = c.same_device({{"packed", &packed}, {"scale", &scale}, {"w", &w}});
  dispatch(c, dev, registry().mxfp4_dequant, packed, scale, w, ctx);
}

void mxfp4_quant(TensorView w, TensorView packed, TensorView scale, const Context& ctx) {
  check::Checker c("mxfp4_quant");
  check_mxfp4(c, packed, scale, w);
  distinct_rows(c, "packed", packed);
  distinct_rows(c, "scale", scale);
  const Device dev = c.same_device({{"w", &w}, {"packed", &packed}, {"scale", &scale}});
  dispatch(c, dev, registry().mxfp4_quant, w, packed, scale, ctx);
}

}  // namespace kimi
