// kimi/ops/gather.h: validation and dispatch.
#include "kimi/ops/gather.h"

#include "core/check.h"
#include "core/index.h"
#include "core/registry.h"

namespace kimi {

void gather_rows(TensorView src, TensorView rows, TensorView out, const Context& ctx) {
  check::Checker c("gather_rows");
  c.rank("src", src, 2);
  c.float_dtype("src", src);
  c.inner_contiguous("src", src);
  c.no_negative_strides("src", src);
  c.rank("rows", rows, 1);
  const int64_t R = src.size(0), D = src.size(1), N = rows.size(0);
  c.activation("out", out, {N, D});
  c.no_negative_strides("out", out);
  const Device dev = c.same_device({{"src", &src}, {"out", &out}});
  Index idx;
  if (c.device_index("rows", rows, N, dev)) idx.device = rows;  // the capturable form (src/core/index.h)
  else idx.host = c.slots("rows", rows, N, "src", R, false);    // each in [0, R), repeats allowed
  if (N > 1 && D > 0 && out.stride(0) < D)
    c.fail("out", "non-overlapping rows (row stride >= " + std::to_string(D) + ")",
           "row stride " + std::to_string(out.stride(0)));
  c.disjoint("out", out, "src", src);
  dispatch(c, dev, registry().gather_rows, src, idx, out, ctx);
}

}  // namespace kimi
