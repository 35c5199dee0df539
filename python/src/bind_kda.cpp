// python/src/bind_kda.cpp: KDA (include/kimi/ops/kda.h): gate, beta, recurrent and chunkwise forward.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "kimi/error.h"
#include "kimi/ops/kda.h"
#include "kimi/ops/kda_decode.h"
#include "view.h"

namespace kimi::py {

namespace {

// gate: "none" (g is the log decay), "softplus" (Kimi-Linear) or "bounded" (K3), see KdaGate.
std::optional<KdaGate> make_gate(const char* op, const std::string& form, const OptArray& A_log,
                                 const OptArray& dt_bias, float lower_bound) {
  if (form == "none") return std::nullopt;
  KdaGate gate;
  if (form == "softplus")
    gate.form = GateForm::softplus;
  else if (form == "bounded")
    gate.form = GateForm::bounded;
  else
    throw Error(std::string(op) + ": argument 'gate': expected 'none', 'softplus' or 'bounded', got '" + form + "'");
  gate.A_log = view(op, "A_log", A_log);
  gate.dt_bias = view(op, "dt_bias", dt_bias);
  gate.lower_bound = lower_bound;
  return gate;
}

}  // namespace

void bind_kda(nb::module_& m) {
  m.def(
      "kda_fwd",
      [](const std::string& mode, const Array& q, const Array& k, const Array& v, const Array& g, const Array& beta,
         const Array& o, const std::string& gate, const OptArray& A_log, const OptArray& dt_bias, float lower_bound,
         bool beta_sigmoid, bool qk_l2norm, std::optional<float> scale, const OptArray& initial_state,
         const OptArray& final_state, bool state_v_first, const OptArray& cu_seqlens, const OptArray& state_slots,
         int chunk_size, uintptr_t stream) {
        const bool chunk = mode == "chunk";
        if (!chunk && mode != "recurrent")
          throw Error("kda_fwd: argument 'mode': expected 'chunk' or 'recurrent', got '" + mode + "'");
        const char* op = chunk ? "kda_chunk_fwd" : "kda_recurrent_fwd";
        KdaArgs a;
        a.q = view(op, "q", q);
        a.k = view(op, "k", k);
        a.v = view(op, "v", v);
        a.g = view(op, "g", g);
        a.beta = view(op, "beta", beta);
        a.o = view(op, "o", o);
        a.gate = make_gate(op, gate, A_log, dt_bias, lower_bound);
        a.beta_sigmoid_in_kernel = beta_sigmoid;
        a.qk_l2norm_in_kernel = qk_l2norm;
        a.scale = scale;
        a.initial_state = view(op, "initial_state", initial_state);
        a.final_state = view(op, "final_state", final_state);
        a.state_layout = state_v_first ? StateLayout::vk : StateLayout::kv;
        a.cu_seqlens = view(op, "cu_seqlens", cu_seqlens);
        a.state_slots = view(op, "state_slots", state_slots);
        const Context ctx = context(stream);
        run([&] {
          if (chunk)
            kda_chunk_fwd(a, chunk_size, ctx);
          else
            kda_recurrent_fwd(a, ctx);
        });
      },
      nb::arg("mode"), nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("g"), nb::arg("beta"), nb::arg("o"),
      nb::kw_only(), nb::arg("gate") = "none", nb::arg("A_log").none() = nb::none(),
      nb::arg("dt_bias").none() = nb::none(), nb::arg("lower_bound") = -5.f, nb::arg("beta_sigmoid") = false,
      nb::arg("qk_l2norm") = false, nb::arg("scale").none() = nb::none(),
      nb::arg("initial_state").none() = nb::none(), nb::arg("final_state").none() = nb::none(),
      nb::arg("state_v_first") = false, nb::arg("cu_seqlens").none() = nb::none(),
      nb::arg("state_slots").none() = nb::none(), nb::arg("chunk_size") = 64, nb::arg("stream") = 0,
      "kda_chunk_fwd (mode 'chunk') or kda_recurrent_fwd (mode 'recurrent') into o (and final_state).");

  m.def(
      "kda_decode_step",
      [](const Array& x_q, const Array& x_k, const Array& x_v, const Array& conv_q, const Array& conv_k,
         const Array& conv_v, const Array& cache_q, const Array& cache_k, const Array& cache_v, const Array& f,
         const std::string& gate, const Array& A_log, const Array& dt_bias, float lower_bound, const Array& b,
         const OptArray& z, const Array& o_norm, float norm_eps, std::optional<float> scale, const Array& state,
         bool state_v_first, const OptArray& slots, const Array& y, uintptr_t stream) {
        const char* op = "kda_decode_step";
        KdaDecodeArgs a;
        a.x_q = view(op, "x_q", x_q), a.x_k = view(op, "x_k", x_k), a.x_v = view(op, "x_v", x_v);
        a.conv_q = view(op, "conv_q", conv_q), a.conv_k = view(op, "conv_k", conv_k), a.conv_v = view(op, "conv_v", conv_v);
        a.cache_q = view(op, "cache_q", cache_q), a.cache_k = view(op, "cache_k", cache_k);
        a.cache_v = view(op, "cache_v", cache_v);
        a.f = view(op, "f", f);
        const std::optional<KdaGate> gt = make_gate(op, gate, A_log, dt_bias, lower_bound);
        if (!gt) throw Error("kda_decode_step: argument 'gate': expected 'softplus' or 'bounded', got 'none'");
        a.gate = *gt;
        a.b = view(op, "b", b), a.z = view(op, "z", z), a.o_norm = view(op, "o_norm", o_norm);
        a.norm_eps = norm_eps, a.scale = scale;
        a.state = view(op, "state", state);
        a.state_layout = state_v_first ? StateLayout::vk : StateLayout::kv;
        a.slots = view(op, "slots", slots);
        a.y = view(op, "y", y);
        const Context ctx = context(stream);
        run([&] { kimi::kda_decode_step(a, ctx); });
      },
      nb::arg("x_q"), nb::arg("x_k"), nb::arg("x_v"), nb::arg("conv_q"), nb::arg("conv_k"), nb::arg("conv_v"),
      nb::arg("cache_q"), nb::arg("cache_k"), nb::arg("cache_v"), nb::arg("f"), nb::arg("gate"), nb::arg("A_log"),
      nb::arg("dt_bias"), nb::arg("lower_bound"), nb::arg("b"), nb::arg("z").none(), nb::arg("o_norm"),
      nb::arg("norm_eps"), nb::arg("scale").none(), nb::arg("state"), nb::arg("state_v_first"),
      nb::arg("slots").none(), nb::arg("y"), nb::arg("stream") = 0,
      "kda_decode_step: one decode token of a whole KDA layer (convs, gate, beta, L2 norm, recurrence on the state "
      "pool, gated RMSNorm) into y; caches and state updated in place.");

  m.def(
      "kda_gate",
      [](const Array& f, const std::string& gate, const Array& A_log, const Array& dt_bias, float lower_bound,
         const Array& g, uintptr_t stream) {
        const std::optional<KdaGate> gt = make_gate("kda_gate", gate, A_log, dt_bias, lower_bound);
        if (!gt) throw Error("kda_gate: argument 'gate': expected 'softplus' or 'bounded', got 'none'");
        const TensorView fv = view("kda_gate", "f", f), gv = view("kda_gate", "g", g);
        const Context ctx = context(stream);
        run([&] { kimi::kda_gate(fv, *gt, gv, ctx); });
      },
      nb::arg("f"), nb::arg("gate"), nb::arg("A_log"), nb::arg("dt_bias"), nb::arg("lower_bound"), nb::arg("g"),
      nb::arg("stream") = 0);

  m.def(
      "kda_beta",
      [](const Array& b, const Array& beta, uintptr_t stream) {
        const TensorView bv = view("kda_beta", "b", b), betav = view("kda_beta", "beta", beta);
        const Context ctx = context(stream);
        run([&] { kimi::kda_beta(bv, betav, ctx); });
      },
      nb::arg("b"), nb::arg("beta"), nb::arg("stream") = 0);
}

}  // namespace kimi::py
