// kimi/ops/random.h: validation and dispatch.
#include "kimi/ops/random.h"

#include <cmath>
#include <limits>
#include <charconv>
#include <string>

#include "core/check.h"
#include "core/registry.h"
#include "core/splitmix.h"

namespace kimi {

namespace {
// The shortest text that reads back as v ("0.5", "255", "2147483647").
std::string num(double v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : "?";
}
}  // namespace

void fill_random(TensorView t, uint64_t seed, double lo, double hi, const Context& ctx) {
  check::Checker c("fill_random");
  c.dtype("t", t, {DType::f32, DType::bf16, DType::u8, DType::i32});
  c.contiguous("t", t);
  if (!std::isfinite(lo)) c.fail("lo", "a finite value", num(lo));
  if (!std::isfinite(hi)) c.fail("hi", "a finite value", num(hi));
  if (!(lo <= hi)) c.fail("hi", ">= lo = " + num(lo), num(hi));
  RandomFill r;
  r.state = splitmix::mix64(seed);
  r.lo = lo;
  if (is_float(t.dtype)) {
    r.width = float(hi - lo);
    if (!std::isfinite(r.width))
      c.fail("hi", "hi - lo finite in f32 (lo = " + num(lo) + ")", num(hi));
  } else {
    const double top = t.dtype == DType::u8 ? 255.0 : double(std::numeric_limits<int32_t>::max());
    const double bottom = t.dtype == DType::u8 ? 0.0 : double(std::numeric_limits<int32_t>::min());
    const std::string range = "an integer in [" + num(bottom) + ", " + num(top) + "] (the range of " + std::string(dtype_name(t.dtype)) + ")";
    if (lo != std::floor(lo) || lo < bottom || lo > top) c.fail("lo", range, num(lo));
    if (hi != std::floor(hi) || hi < bottom || hi > top) c.fail("hi", range, num(hi));
    r.count = uint64_t(int64_t(hi) - int64_t(lo)) + 1;
  }
  if (t.numel() == 0) return;
  dispatch(c, t.device, registry().fill_random, t, r, ctx);
}

}  // namespace kimi
