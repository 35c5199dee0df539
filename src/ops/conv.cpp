// kimi/ops/conv.h: validation and dispatch.
#include "kimi/ops/conv.h"

#include <string>
#include <vector>

#include "core/check.h"
#include "core/registry.h"

namespace kimi {

namespace {
constexpr int64_t kMaxWidth = 8;
}  // namespace

namespace check {
int64_t conv_weight(const Checker& c, std::string_view arg, const TensorView& w, int64_t channels) {
  c.present(arg, w);
  if (w.ndim != 2 && w.ndim != 3)
    c.fail(arg, "2 dimensions [C, W] or 3 dimensions [C, 1, W]", std::to_string(w.ndim) + " (shape " + w.shape_string() + ")");
  if (w.ndim == 2)
    c.shape(arg, w, {channels, kAny});
  else
    c.shape(arg, w, {channels, 1, kAny});
  c.float_dtype(arg, w);
  c.no_negative_strides(arg, w);
  const int64_t width = w.size(-1);
  if (width < 1 || width > kMaxWidth)
    c.fail(arg, "kernel width W (last dimension) in [1, " + std::to_string(kMaxWidth) + "]",
           std::to_string(width) + " (shape " + w.shape_string() + ")");
  return width;
}
}  // namespace check

namespace {
using check::dims;
using check::kAny;

// Optional cache [rows, C, W-1] (rows may be kAny), any float dtype, non-negative strides.
void check_cache(const check::Checker& c, const char* name, const TensorView& t, int64_t rows, int64_t channels,
                 int64_t width) {
  c.shape(name, t, {rows, channels, width - 1});
  c.float_dtype(name, t);
  c.no_negative_strides(name, t);
}

}  // namespace

void short_conv_fwd(TensorView x, TensorView w, TensorView cache_in, TensorView cache_out, TensorView cu_seqlens,
                    TensorView cache_slots, ConvActivation act, TensorView y, const Context& ctx) {
  check::Checker c("short_conv_fwd");
  c.rank("x", x, 3);
  c.activation("x", x, dims(x));
  const int64_t channels = x.size(2);
  c.activation("y", y, dims(x));
  c.disjoint("y", y, "x", x);  // y is written while x is still read (chunk histories)
  const int64_t width = check::conv_weight(c, "w", w, channels);
  if (act != ConvActivation::none && act != ConvActivation::silu)
    c.fail("act", "ConvActivation::none or ConvActivation::silu", std::to_string(int(act)));

  std::vector<int64_t> offsets;
  if (cu_seqlens.present()) {
    if (x.size(0) != 1)
      c.fail("x", "batch 1 (packed [1, total_T, C]) with cu_seqlens", "batch " + std::to_string(x.size(0)) +
                                                                            " (shape " + x.shape_string() + ")");
    offsets = c.cu_seqlens("cu_seqlens", cu_seqlens, x.size(1));
  } else {
    offsets.resize(static_cast<size_t>(x.size(0)) + 1);
    for (size_t n = 0; n < offsets.size(); ++n) offsets[n] = int64_t(n) * x.size(1);  // flat token index b*T + t
  }
  const int64_t nseq = int64_t(offsets.size()) - 1;
  // With slots the caches are pools of one size (taken from cache_in, else cache_out).
  const TensorView& pool = cache_in.present() ? cache_in : cache_out;
  if (cache_slots.present() && !pool.present())
    c.fail("cache_slots", "absent when neither cache_in nor cache_out is given", "present");
  const int64_t rows_n = cache_slots.present() ? (pool.ndim == 3 ? pool.size(0) : 0) : nseq;
  if (cache_in.present()) check_cache(c, "cache_in", cache_in, rows_n, channels, width);
  if (cache_out.present()) check_cache(c, "cache_out", cache_out, rows_n, channels, width);
  c.same_or_disjoint("cache_out", cache_out, "cache_in", cache_in);
  const std::vector<int64_t> rows =
      c.slots("cache_slots", cache_slots, nseq, cache_in.present() ? "cache_in" : "cache_out", rows_n, true);
  const Device dev = c.same_device({{"x", &x},
                                    {"w", &w},
                                    {"cache_in", &cache_in},
                                    {"cache_out", &cache_out},
                                    {"y", &y}});  // cu_seqlens: read on the host
  dispatch(c, dev, registry().short_conv_fwd, x, w, cache_in, cache_out, offsets, cu_seqlens.present(), rows, act, y,
           ctx);
}

void short_conv_update(TensorView x, TensorView w, TensorView cache, TensorView cache_slots, ConvActivation act,
                       TensorView y, const Context& ctx) {
  check::Checker c("short_conv_update");
  c.rank("x", x, 2);
  c.activation("x", x, dims(x));
  const int64_t n = x.size(0), channels = x.size(1);
  c.activation("y", y, dims(x));
  c.disjoint("y", y, "x", x);  // y is written while x is still read (chunk histories)
  const int64_t width = check::conv_weight(c, "w", w, channels);
  if (act != ConvActivation::none && act != ConvActivation::silu)
    c.fail("act", "ConvActivation::none or ConvActivation::silu", std::to_string(int(act)));
  if (width > 1 || cache.present()) check_cache(c, "cache", cache, cache_slots.present() ? kAny : n, channels, width);

  // Without a cache (W = 1) the rows are unused; with one, slots index it (absent: rows 0..n-1).
  const std::vector<int64_t> rows = c.slots("cache_slots", cache_slots, n, "cache", cache.present() ? cache.size(0) : n, true);
  const Device dev =
      c.same_device({{"x", &x}, {"w", &w}, {"cache", &cache}, {"y", &y}});  // slots: read on the host
  dispatch(c, dev, registry().short_conv_update, x, w, cache, rows, act, y, ctx);
}

}  // namespace kimi
