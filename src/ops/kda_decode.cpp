// kimi/ops/kda_decode.h: validation, then on the CPU the kernels of its parts (conv, recurrence, gated norm),
// on CUDA the one fused kernel (src/cuda/kda/decode_step.cuh). Everything is checked before any cache or
// state row is written; slots on the CUDA device are checked for dtype, shape and device only (their values
// are read by the kernel, see the header's contract).
#include "kimi/ops/kda_decode.h"

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/dispatch.h"
#include "core/views.h"
#include "cpu/conv.h"
#include "cpu/kda.h"
#include "cpu/norm.h"
#ifdef KIMI_WITH_CUDA
#include "cuda/kda/kda.h"
#endif

namespace kimi {
namespace {

using check::dims;
using check::kAny;

std::string str(int64_t v) { return std::to_string(v); }

// [N, C] row views as [N, 1, C] / [N, 1, H, C/H] / [N, H, C/H].
TensorView as3(const TensorView& t) { return view::insert_dim(t, 1); }
TensorView heads4(const TensorView& t, int64_t H) { return view::insert_dim(view::split_last(t, H), 1); }
TensorView heads3(const TensorView& t, int64_t H) { return view::split_last(t, H); }

struct Sizes {
  int64_t N, H, K, V, S;
  std::vector<int64_t> rows;  // pool row of sequence n; empty when the slots are on the CUDA device
};

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

Sizes check_args(const check::Checker& c, const KdaDecodeArgs& a) {
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
  if (device_slots(c, a, N)) return {N, H, K, V, S, {}};
  return {N, H, K, V, S, c.slots("slots", a.slots, N, "state", S, true)};
}

// The CPU step as its parts: three conv updates into f32 q, k, v [N, P|Pv], the recurrence (T = 1, state rows
// by slot) into f32 o [N, Pv], the gated norm into y.
void run_parts(const KdaDecodeArgs& a, const Sizes& z, const Context& ctx) {
  const int64_t N = z.N, H = z.H, K = z.K, V = z.V, P = H * K, Pv = H * V;
  std::vector<float> tmp(static_cast<size_t>(N * (2 * P + 2 * Pv)));
  float* const t = tmp.data();
  const TensorView q(t, DType::f32, {N, P}), k(t + N * P, DType::f32, {N, P}), v(t + 2 * N * P, DType::f32, {N, Pv}),
      o(t + 2 * N * P + N * Pv, DType::f32, {N, Pv});
  // 1. convs + SiLU, one token per sequence, caches shifted in place
  std::vector<cpu::ConvSeq> seqs(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) seqs[size_t(n)] = {n, 0, 1, z.rows[size_t(n)]};
  const std::array<std::array<TensorView, 4>, 3> convs = {{{a.x_q, a.conv_q, a.cache_q, q},
                                                           {a.x_k, a.conv_k, a.cache_k, k},
                                                           {a.x_v, a.conv_v, a.cache_v, v}}};
  for (const auto& [x, w, cache, y] : convs) cpu::short_conv(as3(x), w, cache, cache, seqs, ConvActivation::silu, as3(y), ctx);
  // 2. gate, beta, L2 norm, recurrence on the pool rows
  Tensor rows(DType::i64, {N});
  std::copy(z.rows.begin(), z.rows.end(), rows.data_as<int64_t>());
  KdaArgs r;
  r.q = heads4(q, H), r.k = heads4(k, H), r.v = heads4(v, H), r.g = heads4(a.f, H);
  const int64_t bshape[3] = {N, 1, H}, bstrides[3] = {a.b.stride(0), H, 1};
  r.beta = TensorView(a.b.data, a.b.dtype, bshape, bstrides, a.b.device);
  r.gate = a.gate;
  r.beta_sigmoid_in_kernel = r.qk_l2norm_in_kernel = true;
  r.scale = a.scale;
  r.initial_state = r.final_state = a.state;
  r.state_layout = a.state_layout;
  r.state_slots = rows;
  r.o = heads4(o, H);
  cpu::KdaDims d{N, 1, H, K, V, a.scale ? *a.scale : float(1.0 / std::sqrt(double(K))), {}, z.rows};
  for (int64_t n = 0; n < N; ++n) d.seqs.push_back({n, 0, 1});
  cpu::kda_recurrent_fwd(r, d, ctx);
  // 3. per-head gated RMSNorm
  const TensorView zh = a.z.present() ? heads3(a.z, H) : TensorView{};
  cpu::gated_rms_norm(heads3(o, H), zh, a.o_norm, a.norm_eps, heads3(a.y, H), ctx);
}

}  // namespace

void kda_decode_step(const KdaDecodeArgs& a, const Context& ctx) {
  check::Checker c("kda_decode_step");
  const Sizes z = check_args(c, a);
  dispatch(
      c, a.x_q.device, [&] { run_parts(a, z, ctx); },
      [&] {
#ifdef KIMI_WITH_CUDA
        cuda::kda_decode_step(a, z.rows, ctx);  // one launch
#endif
      });
}

}  // namespace kimi
