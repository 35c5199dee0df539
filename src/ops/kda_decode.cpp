// kimi/ops/kda_decode.h: validation and dispatch (the CPU backend runs the step as its parts, src/cpu/kda_decode.cpp;
// CUDA as one fused kernel, src/cuda/kda/decode_step.cuh). Everything is checked before any cache or state row is
// written; slots on the CUDA device are checked for dtype, shape and device only (their values are read by the
// kernel, see the header's contract).
#include "kimi/ops/kda_decode.h"

#include <cmath>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/registry.h"

namespace kimi {
namespace {

using check::dims;
using check::kAny;

std::string str(int64_t v) { return std::to_string(v); }

// Slots on the CUDA device (the capturable form): i32/i64 [N] on the tensors' device. Their values cannot be
// read here; the kernel skips a sequence whose slot is outside [0, S) and makes its y rows NaN.
bool device_slots(const check::Checker& c, const KdaDecodeArgs& a, int64_t N) {
  if (!a.slots.present() || a.slots.device.type == DeviceType::cpu) return false;
  c.rank("slots", a.slots, 1);
  c.dtype("slots", a.slots, {DType::i32, DType::i64});
  c.shape("slots", a.slots, {N});
  c.no_negative_strides("slots", a.slots);
  if (!(a.slots.device == a.x_q.device))
    c.fail("slots",
           a.x_q.device.type == DeviceType::cpu
               ? std::string("device cpu (like the tensors)")
               : "device cpu (host values) or " + to_string(a.x_q.device) + " (the tensors' device)",
           to_string(a.slots.device));
  // The kernel reads the slots while it writes y and the pools: no shared memory.
  const std::pair<const char*, const TensorView*> written[] = {
      {"y", &a.y}, {"state", &a.state}, {"cache_q", &a.cache_q}, {"cache_k", &a.cache_k}, {"cache_v", &a.cache_v}};
  for (const auto& [name, t] : written) c.disjoint(name, *t, "slots", a.slots);
  return true;
}

// Returns the pool row of each sequence; empty when the slots are on the CUDA device.
std::vector<int64_t> check_args(const check::Checker& c, const KdaDecodeArgs& a) {
  c.rank("x_q", a.x_q, 2);
  c.activation("x_q", a.x_q, dims(a.x_q));
  const int64_t N = a.x_q.size(0), P = a.x_q.size(1);
  c.rank("b", a.b, 2);
  c.activation("b", a.b, {N, kAny});
  const int64_t H = a.b.size(1);
  if (H < 1 || P % H != 0) c.fail("b", "H = shape[1] >= 1 dividing x_q.shape[1] = " + str(P), str(H));
  const int64_t K = P / H;
  c.activation("x_k", a.x_k, {N, P});
  c.activation("f", a.f, {N, P});
  c.rank("x_v", a.x_v, 2);
  c.activation("x_v", a.x_v, {N, kAny});
  const int64_t Pv = a.x_v.size(1);
  if (Pv % H != 0) c.fail("x_v", "shape[1] a multiple of H = " + str(H), str(Pv));
  const int64_t V = Pv / H;
  if (K < 1 || K > kKdaMaxHeadDim) c.fail("x_q", "head dim K = shape[1] / H in [1, " + str(kKdaMaxHeadDim) + "]", str(K));
  if (V < 1 || V > kKdaMaxHeadDim) c.fail("x_v", "head dim V = shape[1] / H in [1, " + str(kKdaMaxHeadDim) + "]", str(V));
  if (a.z.present()) c.activation("z", a.z, {N, Pv});
  c.activation("y", a.y, {N, Pv});

  // state pool [S, H, K, V] / [S, H, V, K]
  c.rank("state", a.state, 4);
  const int64_t S = a.state.size(0);
  const bool kv = a.state_layout == StateLayout::kv;
  const std::vector<int64_t> st = kv ? std::vector<int64_t>{S, H, K, V} : std::vector<int64_t>{S, H, V, K};
  if (dims(a.state) != st)
    c.fail("state", "shape " + check::shape_string(st) + (kv ? " (layout kv [S, H, K, V])" : " (layout vk [S, H, V, K])"),
           a.state.shape_string());
  c.dtype("state", a.state, {DType::f32});
  c.contiguous("state", a.state);

  // convs: weights of one width W, caches [S, C, W-1]
  const int64_t W = check::conv_weight(c, "conv_q", a.conv_q, P);
  if (check::conv_weight(c, "conv_k", a.conv_k, P) != W)
    c.fail("conv_k", "kernel width " + str(W) + " (like conv_q)", str(a.conv_k.size(-1)));
  if (check::conv_weight(c, "conv_v", a.conv_v, Pv) != W)
    c.fail("conv_v", "kernel width " + str(W) + " (like conv_q)", str(a.conv_v.size(-1)));
  const std::pair<const char*, std::pair<const TensorView*, int64_t>> caches[] = {
      {"cache_q", {&a.cache_q, P}}, {"cache_k", {&a.cache_k, P}}, {"cache_v", {&a.cache_v, Pv}}};
  for (const auto& [name, tc] : caches) {
    if (W == 1 && !tc.first->present()) continue;
    c.shape(name, *tc.first, {S, tc.second, W - 1});
    c.float_dtype(name, *tc.first);
    c.no_negative_strides(name, *tc.first);
  }

  check::kda_gate(c, a.gate, H, K);
  c.shape("o_norm", a.o_norm, {V});
  c.float_dtype("o_norm", a.o_norm);
  c.inner_contiguous("o_norm", a.o_norm);
  if (!(std::isfinite(a.norm_eps) && a.norm_eps >= 0.f)) c.fail("norm_eps", "a finite value >= 0", std::to_string(a.norm_eps));
  if (a.scale && !std::isfinite(*a.scale)) c.fail("scale", "a finite value", std::to_string(*a.scale));

  // y is written while the inputs are read; caches and state are updated in place and must not overlap it.
  const std::pair<const char*, const TensorView*> inputs[] = {
      {"x_q", &a.x_q}, {"x_k", &a.x_k}, {"x_v", &a.x_v},       {"f", &a.f},
      {"b", &a.b},     {"z", &a.z},     {"state", &a.state}, {"cache_q", &a.cache_q},
      {"cache_k", &a.cache_k}, {"cache_v", &a.cache_v}};
  for (const auto& [name, t] : inputs) c.disjoint("y", a.y, name, *t);
  // The pools are written in place: none may share memory with another pool or with any read-only input.
  const std::pair<const char*, const TensorView*> pools[] = {
      {"state", &a.state}, {"cache_q", &a.cache_q}, {"cache_k", &a.cache_k}, {"cache_v", &a.cache_v}};
  const std::pair<const char*, const TensorView*> reads[] = {
      {"x_q", &a.x_q},       {"x_k", &a.x_k},       {"x_v", &a.x_v},         {"f", &a.f},
      {"b", &a.b},           {"z", &a.z},           {"conv_q", &a.conv_q},   {"conv_k", &a.conv_k},
      {"conv_v", &a.conv_v}, {"o_norm", &a.o_norm}, {"gate.A_log", &a.gate.A_log}, {"gate.dt_bias", &a.gate.dt_bias}};
  for (size_t i = 0; i < std::size(pools); ++i) {
    for (size_t j = i + 1; j < std::size(pools); ++j) c.disjoint(pools[i].first, *pools[i].second, pools[j].first, *pools[j].second);
    for (const auto& [name, t] : reads) c.disjoint(pools[i].first, *pools[i].second, name, *t);
  }
  c.same_device({{"x_q", &a.x_q}, {"x_k", &a.x_k}, {"x_v", &a.x_v}, {"conv_q", &a.conv_q}, {"conv_k", &a.conv_k},
                 {"conv_v", &a.conv_v}, {"cache_q", &a.cache_q}, {"cache_k", &a.cache_k}, {"cache_v", &a.cache_v},
                 {"f", &a.f}, {"gate.A_log", &a.gate.A_log}, {"gate.dt_bias", &a.gate.dt_bias}, {"b", &a.b},
                 {"z", &a.z}, {"o_norm", &a.o_norm}, {"state", &a.state}, {"y", &a.y}});
  if (device_slots(c, a, N)) return {};
  return c.slots("slots", a.slots, N, "state", S, true);
}

}  // namespace

void kda_decode_step(const KdaDecodeArgs& a, const Context& ctx) {
  check::Checker c("kda_decode_step");
  const std::vector<int64_t> rows = check_args(c, a);
  dispatch(c, a.x_q.device, registry().kda_decode_step, a, rows, ctx);
}

}  // namespace kimi
