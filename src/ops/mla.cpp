// kimi/ops/mla.h: validation and dispatch. Every size is derived from the tensors and cross-checked.
#include "kimi/ops/mla.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>
#include <string>
#include <unordered_map>

#include "core/check.h"
#include "core/index.h"
#include "core/registry.h"

namespace kimi {

namespace {
using check::kAny;
using std::to_string;

void float_rows(const check::Checker& c, const char* arg, const TensorView& t, int ndim) {
  c.rank(arg, t, ndim);
  c.float_dtype(arg, t);
  c.inner_contiguous(arg, t);
}

// w_kvb: dense [H*(Dn+Dv), R]; `where` says where each size came from.
void check_w_kvb(const check::Checker& c, const Weight& w, const MlaDims& d, const std::string& where) {
  if (w.is_mxfp4()) c.fail("w_kvb", "a dense weight (f32/bf16/f16, no scale)", "MXFP4 (scale present)");
  float_rows(c, "w_kvb.w", w.w, 2);
  const int64_t rows = d.heads * (d.qk_nope + d.v_dim);
  if (w.w.size(0) != rows || w.w.size(1) != d.kv_lora)
    c.fail("w_kvb.w",
           "shape [H*(Dn+Dv), R] = [" + to_string(rows) + ", " + to_string(d.kv_lora) + "] with H = " + to_string(d.heads) +
               ", Dn = " + to_string(d.qk_nope) + ", Dv = " + to_string(d.v_dim) + ", R = " + to_string(d.kv_lora) +
               ", P = " + to_string(d.qk_rope) + " (" + where + ")",
           w.w.shape_string());
}

float resolve_scale(const check::Checker& c, std::optional<float> s, const MlaDims& d) {
  if (!s) return float(1.0 / std::sqrt(double(d.qk_nope + d.qk_rope)));
  if (!std::isfinite(*s)) c.fail("softmax_scale", "a finite value", to_string(*s));
  return *s;
}

void check_gate(const check::Checker& c, const TensorView& gate, std::vector<int64_t> lead, const MlaDims& d) {
  if (!gate.present()) return;
  lead.push_back(d.heads * d.v_dim);
  float_rows(c, "gate", gate, int(lead.size()));
  c.shape("gate", gate, lead);
}
}  // namespace

void mla_prefill(TensorView q, TensorView latent, TensorView k_pe, const Weight& w_kvb, TensorView gate,
                 TensorView cu_seqlens, std::optional<float> softmax_scale, TensorView o, const Context& ctx) {
  check::Checker c("mla_prefill");
  float_rows(c, "q", q, 4);
  const int64_t B = q.size(0), T = q.size(1);
  float_rows(c, "latent", latent, 3);
  c.shape("latent", latent, {B, T, kAny});
  float_rows(c, "k_pe", k_pe, 3);
  c.shape("k_pe", k_pe, {B, T, kAny});
  MlaDims d;
  d.heads = q.size(2);
  d.kv_lora = latent.size(2);
  d.qk_rope = k_pe.size(2);
  if (d.kv_lora < 1) c.fail("latent", "last dimension R >= 1", "0");
  if (q.size(3) <= d.qk_rope)
    c.fail("q", "last dimension Dn+P > P = " + to_string(d.qk_rope) + " (k_pe.size(-1))", to_string(q.size(3)));
  d.qk_nope = q.size(3) - d.qk_rope;
  float_rows(c, "o", o, 4);
  c.shape("o", o, {B, T, d.heads, kAny});
  d.v_dim = o.size(3);
  if (d.v_dim < 1) c.fail("o", "last dimension Dv >= 1", "0");
  check_w_kvb(c, w_kvb, d, "H = q.size(-2), P = k_pe.size(-1), Dn = q.size(-1) - P, Dv = o.size(-1), R = latent.size(-1)");
  check_gate(c, gate, {B, T}, d);
  std::vector<int64_t> cu;
  if (cu_seqlens.present()) {
    if (B != 1) c.fail("q", "batch size B = 1 with cu_seqlens (packed varlen)", to_string(B));
    cu = c.cu_seqlens("cu_seqlens", cu_seqlens, T);
  }
  d.scale = resolve_scale(c, softmax_scale, d);
  const Device dev =
      c.same_device({{"q", &q}, {"latent", &latent}, {"k_pe", &k_pe}, {"w_kvb.w", &w_kvb.w}, {"gate", &gate}, {"o", &o}});
  dispatch(c, dev, registry().mla_prefill, q, latent, k_pe, w_kvb, gate, cu, d, o, ctx);
}

void mla_cache_write(TensorView latent, TensorView k_pe, TensorView cache, TensorView start, TensorView slots,
                     const Context& ctx) {
  check::Checker c("mla_cache_write");
  float_rows(c, "latent", latent, 3);
  const int64_t N = latent.size(0), T = latent.size(1), R = latent.size(2);
  float_rows(c, "k_pe", k_pe, 3);
  c.shape("k_pe", k_pe, {N, T, kAny});
  const int64_t P = k_pe.size(2);
  float_rows(c, "cache", cache, 3);
  if (cache.size(2) != R + P)
    c.fail("cache", "last dimension R+P = " + to_string(R) + "+" + to_string(P) + " = " + to_string(R + P) +
                        " (latent.size(-1) + k_pe.size(-1))",
           cache.shape_string());
  const int64_t Nc = cache.size(0), L = cache.size(1);
  const Device dev = c.same_device({{"latent", &latent}, {"k_pe", &k_pe}, {"cache", &cache}});
  Index st, sl;
  const bool dev_start = c.device_index("start", start, N, dev), dev_slots = c.device_index("slots", slots, N, dev);
  if (dev_start != dev_slots)
    c.fail(dev_start ? "slots" : "start", std::string("on ") + (dev_start ? to_string(dev) : "the host") +
                                              " like '" + (dev_start ? "start" : "slots") + "' (both or neither on the device)",
           dev_start ? (slots.present() ? to_string(slots.device) : "absent") : to_string(start.device));
  if (dev_start) {  // the capturable form: values read by the kernel only (src/core/index.h)
    st.device = start, sl.device = slots;
    dispatch(c, dev, registry().mla_cache_write, latent, k_pe, cache, st, sl, ctx);
    return;
  }
  st.host = c.host_index("start", start, N);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t s = st.host[size_t(n)];
    if (s < 0 || T > L || s > L - T)  // no s + T: it can overflow for i64 starts
      c.fail("start", "0 <= start[n] and start[n] + T <= L = " + to_string(L) + " (T = " + to_string(T) + ")",
             "start[" + to_string(n) + "] = " + to_string(s));
  }
  sl.host = c.slots("slots", slots, N, "cache", Nc, false);
  // Each cache row is written once: a slot may repeat (a packed batch written a row per token) only with
  // disjoint row ranges [start, start + T).
  const std::vector<int64_t>& sv = sl.host;
  const std::vector<int64_t>& tv = st.host;
  std::vector<int64_t> order(static_cast<size_t>(N));
  std::iota(order.begin(), order.end(), int64_t(0));
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return std::tuple(sv[size_t(a)], tv[size_t(a)], a) < std::tuple(sv[size_t(b)], tv[size_t(b)], b);
  });
  for (size_t i = 1; i < order.size(); ++i) {
    const int64_t a = order[i - 1], b = order[i];
    if (sv[size_t(a)] == sv[size_t(b)] && tv[size_t(b)] - tv[size_t(a)] < T) {
      const int64_t lo = std::min(a, b), hi = std::max(a, b);
      c.fail("slots",
             "distinct rows of 'cache' (a slot may repeat only with disjoint row ranges [start, start + T), T = " +
                 to_string(T) + ")",
             "slots[" + to_string(lo) + "] = slots[" + to_string(hi) + "] = " + to_string(sv[size_t(a)]) + " with start[" +
                 to_string(lo) + "] = " + to_string(tv[size_t(lo)]) + " and start[" + to_string(hi) +
                 "] = " + to_string(tv[size_t(hi)]));
    }
  }
  dispatch(c, dev, registry().mla_cache_write, latent, k_pe, cache, st, sl, ctx);
}

void mla_decode(TensorView q, TensorView cache, TensorView lens, TensorView slots, const Weight& w_kvb, TensorView gate,
                std::optional<float> softmax_scale, TensorView o, const Context& ctx) {
  check::Checker c("mla_decode");
  float_rows(c, "q", q, 3);
  const int64_t N = q.size(0);
  float_rows(c, "cache", cache, 3);
  const int64_t Nc = cache.size(0), L = cache.size(1);
  if (w_kvb.is_mxfp4()) c.fail("w_kvb", "a dense weight (f32/bf16/f16, no scale)", "MXFP4 (scale present)");
  float_rows(c, "w_kvb.w", w_kvb.w, 2);
  MlaDims d;
  d.heads = q.size(1);
  d.kv_lora = w_kvb.w.size(1);
  if (d.kv_lora < 1) c.fail("w_kvb.w", "R >= 1 columns", "0");
  if (cache.size(2) < d.kv_lora)
    c.fail("cache", "last dimension R+P >= R = " + to_string(d.kv_lora) + " (w_kvb columns)", cache.shape_string());
  d.qk_rope = cache.size(2) - d.kv_lora;
  if (q.size(2) <= d.qk_rope)
    c.fail("q", "last dimension Dn+P > P = " + to_string(d.qk_rope) + " (cache.size(-1) - R)", to_string(q.size(2)));
  d.qk_nope = q.size(2) - d.qk_rope;
  float_rows(c, "o", o, 3);
  c.shape("o", o, {N, d.heads, kAny});
  d.v_dim = o.size(2);
  if (d.v_dim < 1) c.fail("o", "last dimension Dv >= 1", "0");
  check_w_kvb(c, w_kvb, d, "H = q.size(-2), R = w_kvb columns, P = cache.size(-1) - R, Dn = q.size(-1) - P, Dv = o.size(-1)");
  check_gate(c, gate, {N}, d);
  d.scale = resolve_scale(c, softmax_scale, d);
  const Device dev = c.same_device({{"q", &q}, {"cache", &cache}, {"w_kvb.w", &w_kvb.w}, {"gate", &gate}, {"o", &o}});
  Index ln, sl;
  const bool dev_lens = c.device_index("lens", lens, N, dev), dev_slots = c.device_index("slots", slots, N, dev);
  if (dev_lens != dev_slots)
    c.fail(dev_lens ? "slots" : "lens", std::string("on ") + (dev_lens ? to_string(dev) : "the host") + " like '" +
                                            (dev_lens ? "lens" : "slots") + "' (both or neither on the device)",
           dev_lens ? (slots.present() ? to_string(slots.device) : "absent") : to_string(lens.device));
  if (dev_lens) {  // the capturable form: values read by the kernels only (src/core/index.h)
    ln.device = lens, sl.device = slots;
  } else {
    ln.host = c.host_index("lens", lens, N);
    for (int64_t n = 0; n < N; ++n)
      if (ln.host[size_t(n)] < 1 || ln.host[size_t(n)] > L)
        c.fail("lens", "lens[n] in [1, L] = [1, " + to_string(L) + "]",
               "lens[" + to_string(n) + "] = " + to_string(ln.host[size_t(n)]));
    sl.host = c.slots("slots", slots, N, "cache", Nc, false);
  }
  dispatch(c, dev, registry().mla_decode, q, cache, ln, sl, w_kvb, gate, d, o, ctx);
}

}  // namespace kimi
