// kimi/ops/attn_res.h: validation and dispatch.
#include "kimi/ops/attn_res.h"

#include <string>

#include "core/check.h"
#include "core/registry.h"

namespace kimi {

void attn_res(TensorView partial, std::span<const TensorView> blocks, TensorView proj_w, TensorView norm_w, float eps,
              TensorView out, const Context& ctx) {
  check::Checker c("attn_res");
  c.rank("partial", partial, 2);
  c.float_dtype("partial", partial);
  c.inner_contiguous("partial", partial);
  const int64_t t = partial.size(0), d = partial.size(1);
  for (size_t i = 0; i < blocks.size(); ++i) {
    const std::string name = "blocks[" + std::to_string(i) + "]";
    c.shape(name, blocks[i], {t, d});
    c.float_dtype(name, blocks[i]);
    c.inner_contiguous(name, blocks[i]);
  }
  c.shape("proj_w", proj_w, {d});
  c.float_dtype("proj_w", proj_w);
  c.no_negative_strides("proj_w", proj_w);
  c.shape("norm_w", norm_w, {d});
  c.float_dtype("norm_w", norm_w);
  c.no_negative_strides("norm_w", norm_w);
  if (!(eps >= 0.f)) c.fail("eps", "a value >= 0", std::to_string(eps));
  c.shape("out", out, {t, d});
  c.float_dtype("out", out);
  c.inner_contiguous("out", out);
  const Device dev =
      c.same_device({{"partial", &partial}, {"proj_w", &proj_w}, {"norm_w", &norm_w}, {"out", &out}});
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (!(blocks[i].device == dev))
      c.fail("blocks[" + std::to_string(i) + "]", "device " + to_string(dev) + " (like 'partial')",
             to_string(blocks[i].device));
  }
  dispatch(c, dev, registry().attn_res, partial, blocks, proj_w, norm_w, eps, out, ctx);
}

}  // namespace kimi
