// kimi/ops/kda.h: validation and dispatch.
#include "kimi/ops/kda.h"

#include <cmath>
#include <string>

#include "core/check.h"
#include "core/registry.h"

namespace kimi {

namespace {
using check::dims;
using check::kAny;

std::string str(int64_t v) { return std::to_string(v); }
}  // namespace

// A_log f32 [H], dt_bias f32 [H*K] or [H, K] (contiguous).
void check::kda_gate(const check::Checker& c, const KdaGate& gate, int64_t H, int64_t K) {
  c.shape("gate.A_log", gate.A_log, {H});
  c.dtype("gate.A_log", gate.A_log, {DType::f32});
  c.no_negative_strides("gate.A_log", gate.A_log);
  const TensorView& dt = gate.dt_bias;
  c.present("gate.dt_bias", dt);
  if (dt.ndim == 2)
    c.shape("gate.dt_bias", dt, {H, K});
  else
    c.shape("gate.dt_bias", dt, {H * K});
  c.dtype("gate.dt_bias", dt, {DType::f32});
  c.contiguous("gate.dt_bias", dt);
  if (gate.form == GateForm::bounded && !(std::isfinite(gate.lower_bound) && gate.lower_bound <= 0.f))
    c.fail("gate.lower_bound", "a finite value <= 0", std::to_string(gate.lower_bound));
}

namespace {

// Validates every argument of kda_recurrent_fwd / kda_chunk_fwd and resolves the sizes.
KdaDims check_args(const check::Checker& c, const KdaArgs& a) {
  c.rank("q", a.q, 4);
  c.float_dtype("q", a.q);
  c.inner_contiguous("q", a.q);
  const int64_t B = a.q.size(0), T = a.q.size(1), H = a.q.size(2), K = a.q.size(3);
  if (K < 1 || K > kKdaMaxHeadDim)
    c.fail("q", "head dim K = shape[3] in [1, " + str(kKdaMaxHeadDim) + "]",
           str(K) + " (shape " + a.q.shape_string() + ")");
  c.activation("k", a.k, {B, T, H, K});
  c.rank("v", a.v, 4);
  c.activation("v", a.v, {B, T, H, kAny});
  const int64_t V = a.v.size(3);
  if (V < 1 || V > kKdaMaxHeadDim)
    c.fail("v", "value head dim V = shape[3] in [1, " + str(kKdaMaxHeadDim) + "]",
           str(V) + " (shape " + a.v.shape_string() + ")");
  c.activation("g", a.g, {B, T, H, K});
  c.shape("beta", a.beta, {B, T, H});
  c.float_dtype("beta", a.beta);
  c.no_negative_strides("beta", a.beta);
  c.activation("o", a.o, {B, T, H, V});
  if (a.gate) check::kda_gate(c, *a.gate, H, K);
  if (a.scale && !std::isfinite(*a.scale)) c.fail("scale", "a finite value", std::to_string(*a.scale));

  const TensorView none{};
  const TensorView& A_log = a.gate ? a.gate->A_log : none;
  const TensorView& dt_bias = a.gate ? a.gate->dt_bias : none;
  const Device dev = c.same_device({{"q", &a.q},
                                    {"k", &a.k},
                                    {"v", &a.v},
                                    {"g", &a.g},
                                    {"beta", &a.beta},
                                    {"o", &a.o},
                                    {"gate.A_log", &A_log},
                                    {"gate.dt_bias", &dt_bias},
                                    {"initial_state", &a.initial_state},
                                    {"final_state", &a.final_state}});
  (void)dev;

  KdaDims d{B, T, H, K, V, a.scale ? *a.scale : float(1.0 / std::sqrt(double(K))), {}, {}};
  if (a.cu_seqlens.present()) {
    if (B != 1) c.fail("cu_seqlens", "batch size 1 (q.shape[0]) with cu_seqlens", "q.shape[0] = " + str(B));
    const std::vector<int64_t> off = c.cu_seqlens("cu_seqlens", a.cu_seqlens, T);
    for (size_t i = 0; i + 1 < off.size(); ++i) d.seqs.push_back({0, off[i], off[i + 1] - off[i]});
  } else {
    for (int64_t b = 0; b < B; ++b) d.seqs.push_back({b, 0, T});
  }
  const int64_t N = int64_t(d.seqs.size());
  // State rows: N, or the pool size with state_slots (both states the same pool size).
  int64_t rows = N;
  if (a.state_slots.present()) {
    const TensorView& s0 = a.initial_state.present() ? a.initial_state : a.final_state;
    if (!s0.present()) c.fail("state_slots", "absent when neither initial_state nor final_state is given", "present");
    rows = s0.ndim == 4 ? s0.size(0) : 0;
  }
  const bool kv = a.state_layout == StateLayout::kv;
  const std::vector<int64_t> st = kv ? std::vector<int64_t>{rows, H, K, V} : std::vector<int64_t>{rows, H, V, K};
  const std::string lay = kv ? " (layout kv [N, H, K, V])" : " (layout vk [N, H, V, K])";
  for (const auto& [name, t] : {std::pair<const char*, const TensorView*>{"initial_state", &a.initial_state},
                                {"final_state", &a.final_state}}) {
    if (!t->present()) continue;
    if (t->ndim != 4 || dims(*t) != st)
      c.fail(name, "shape " + check::shape_string(st) + lay, t->shape_string());
    c.dtype(name, *t, {DType::f32});
    c.contiguous(name, *t);
  }
  d.state_rows = c.slots("state_slots", a.state_slots, N, "initial_state", rows, true);
  if (a.initial_state.present() && a.final_state.present() && a.initial_state.data != a.final_state.data) {
    const char* i0 = static_cast<const char*>(a.initial_state.data);
    const char* f0 = static_cast<const char*>(a.final_state.data);
    const int64_t bytes = rows * H * K * V * 4;
    if (i0 < f0 + bytes && f0 < i0 + bytes)
      c.fail("final_state", "the same memory as initial_state or no overlap with it", "a partial overlap");
  }
  return d;
}

}  // namespace

void kda_gate(TensorView f, const KdaGate& gate, TensorView g, const Context& ctx) {
  check::Checker c("kda_gate");
  c.present("f", f);
  if (f.ndim < 2)
    c.fail("f", "at least 2 dimensions [..., H, K]", str(f.ndim) + " (shape " + f.shape_string() + ")");
  c.float_dtype("f", f);
  c.inner_contiguous("f", f);
  const int64_t H = f.size(-2), K = f.size(-1);
  c.activation("g", g, dims(f));
  check::kda_gate(c, gate, H, K);
  const Device dev =
      c.same_device({{"f", &f}, {"gate.A_log", &gate.A_log}, {"gate.dt_bias", &gate.dt_bias}, {"g", &g}});
  dispatch(c, dev, registry().kda_gate, f, gate, g, ctx);
}

void kda_beta(TensorView b, TensorView beta, const Context& ctx) {
  check::Checker c("kda_beta");
  c.present("b", b);
  if (b.ndim < 1) c.fail("b", "at least 1 dimension [..., H]", "0");
  c.float_dtype("b", b);
  c.inner_contiguous("b", b);
  c.activation("beta", beta, dims(b));
  const Device dev = c.same_device({{"b", &b}, {"beta", &beta}});
  dispatch(c, dev, registry().kda_beta, b, beta, ctx);
}

void kda_recurrent_fwd(const KdaArgs& args, const Context& ctx) {
  check::Checker c("kda_recurrent_fwd");
  const KdaDims d = check_args(c, args);
  dispatch(c, args.q.device, registry().kda_recurrent_fwd, args, d, ctx);
}

void kda_chunk_fwd(const KdaArgs& args, int chunk_size, const Context& ctx) {
  check::Checker c("kda_chunk_fwd");
  c.range("chunk_size", chunk_size, 1, 256);
  const KdaDims d = check_args(c, args);
  dispatch(c, args.q.device, registry().kda_chunk_fwd, args, d, chunk_size, ctx);
}

}  // namespace kimi
