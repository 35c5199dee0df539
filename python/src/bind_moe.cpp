// python/src/bind_moe.cpp: router, Quantile Balancing, GLU (SiLU / SiTU), MLP, latent MoE
// (include/kimi/ops/moe.h). Weights are (w, scale) pairs: scale None for dense, the E8M0 scales for MXFP4.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <vector>

#include "kimi/error.h"
#include "kimi/ops/moe.h"
#include "view.h"

namespace kimi::py {

namespace {

GluParams glu_params(const char* op, const std::string& act, float situ_beta, float situ_linear_beta) {
  GluParams p;
  if (act == "silu")
    p.act = GluAct::silu;
  else if (act == "situ")
    p.act = GluAct::situ;
  else
    throw Error(std::string(op) + ": argument 'act': expected 'silu' or 'situ', got '" + act + "'");
  p.situ_beta = situ_beta;
  p.situ_linear_beta = situ_linear_beta;
  return p;
}

// An MLP as 6 arrays: gate, gate_scale, up, up_scale, down, down_scale (scales None for dense).
using MlpArrays = std::vector<OptArray>;

MlpWeights mlp_weights(const char* op, const std::string& name, const MlpArrays& a) {
  if (a.size() != 6)
    throw Error(std::string(op) + ": argument '" + name + "': expected 6 arrays (gate, gate_scale, up, up_scale, " +
                "down, down_scale), got " + std::to_string(a.size()));
  return MlpWeights{weight(op, (name + ".gate").c_str(), a[0], a[1]), weight(op, (name + ".up").c_str(), a[2], a[3]),
                    weight(op, (name + ".down").c_str(), a[4], a[5])};
}

}  // namespace

void bind_moe(nb::module_& m) {
  m.def(
      "moe_router",
      [](const Array& logits, const OptArray& bias, int top_k, bool renormalize, float scaling, const Array& ids,
         const Array& weights, uintptr_t stream) {
        const char* op = "moe_router";
        const TensorView lv = view(op, "logits", logits), bv = view(op, "bias", bias), iv = view(op, "ids", ids),
                         wv = view(op, "weights", weights);
        const RouterParams p{top_k, renormalize, scaling};
        const Context ctx = context(stream);
        run([&] { kimi::moe_router(lv, bv, p, iv, wv, ctx); });
      },
      nb::arg("logits"), nb::arg("bias").none(), nb::arg("top_k"), nb::arg("renormalize"), nb::arg("scaling"),
      nb::arg("ids"), nb::arg("weights"), nb::arg("stream") = 0);

  m.def(
      "moe_quantile_balance",
      [](const Array& scores, const Array& bias, int top_k, uintptr_t stream) {
        const TensorView sv = view("moe_quantile_balance", "scores", scores),
                         bv = view("moe_quantile_balance", "bias", bias);
        const Context ctx = context(stream);
        run([&] { kimi::moe_quantile_balance(sv, bv, top_k, ctx); });
      },
      nb::arg("scores"), nb::arg("bias"), nb::arg("top_k"), nb::arg("stream") = 0);

  m.def(
      "glu",
      [](const Array& gate, const Array& up, const std::string& act, float situ_beta, float situ_linear_beta,
         const Array& h, uintptr_t stream) {
        const GluParams p = glu_params("glu", act, situ_beta, situ_linear_beta);
        const TensorView gv = view("glu", "gate", gate), uv = view("glu", "up", up), hv = view("glu", "h", h);
        const Context ctx = context(stream);
        run([&] { kimi::glu(gv, uv, p, hv, ctx); });
      },
      nb::arg("gate"), nb::arg("up"), nb::arg("act"), nb::arg("situ_beta"), nb::arg("situ_linear_beta"), nb::arg("h"),
      nb::arg("stream") = 0);

  m.def(
      "mlp",
      [](const Array& x, const MlpArrays& w, const std::string& act, float situ_beta, float situ_linear_beta,
         const Array& y, float beta, uintptr_t stream) {
        const GluParams p = glu_params("mlp", act, situ_beta, situ_linear_beta);
        const MlpWeights mw = mlp_weights("mlp", "w", w);
        const TensorView xv = view("mlp", "x", x), yv = view("mlp", "y", y);
        const Context ctx = context(stream);
        run([&] { kimi::mlp(xv, mw, p, yv, beta, ctx); });
      },
      nb::arg("x"), nb::arg("w"), nb::arg("act"), nb::arg("situ_beta"), nb::arg("situ_linear_beta"), nb::arg("y"),
      nb::arg("beta") = 0.f, nb::arg("stream") = 0);

  m.def(
      "latent_moe",
      [](const Array& x, const Array& router, const OptArray& router_scale, const OptArray& router_bias,
         const OptArray& latent_down, const OptArray& latent_down_scale, const OptArray& latent_norm,
         const OptArray& latent_up, const OptArray& latent_up_scale, const std::vector<MlpArrays>& experts,
         const std::optional<MlpArrays>& shared, int top_k, bool renormalize, float scaling, const std::string& act,
         float situ_beta, float situ_linear_beta, float norm_eps, const Array& out, const OptArray& ids,
         const OptArray& weights, uintptr_t stream) {
        const char* op = "latent_moe";
        std::vector<MlpWeights> ex;
        ex.reserve(experts.size());
        for (size_t e = 0; e < experts.size(); ++e)
          ex.push_back(mlp_weights(op, "experts[" + std::to_string(e) + "]", experts[e]));
        std::optional<MlpWeights> sh;
        if (shared) sh = mlp_weights(op, "shared", *shared);
        LatentMoeWeights w;
        w.router = weight(op, "router", router, router_scale);
        w.router_bias = view(op, "router_bias", router_bias);
        w.latent_down = weight(op, "latent_down", latent_down, latent_down_scale);
        w.latent_norm = view(op, "latent_norm", latent_norm);
        w.latent_up = weight(op, "latent_up", latent_up, latent_up_scale);
        w.experts = ex;
        w.shared = sh ? &*sh : nullptr;
        const RouterParams rp{top_k, renormalize, scaling};
        const GluParams gp = glu_params(op, act, situ_beta, situ_linear_beta);
        const TensorView xv = view(op, "x", x), ov = view(op, "out", out), iv = view(op, "ids", ids),
                         wv = view(op, "weights", weights);
        const Context ctx = context(stream);
        run([&] { kimi::latent_moe(xv, w, rp, gp, norm_eps, ov, iv, wv, 0.f, ctx); });
      },
      nb::arg("x"), nb::arg("router"), nb::arg("router_scale").none(), nb::arg("router_bias").none(),
      nb::arg("latent_down").none(), nb::arg("latent_down_scale").none(), nb::arg("latent_norm").none(),
      nb::arg("latent_up").none(), nb::arg("latent_up_scale").none(), nb::arg("experts"), nb::arg("shared").none(),
      nb::arg("top_k"), nb::arg("renormalize"), nb::arg("scaling"), nb::arg("act"), nb::arg("situ_beta"),
      nb::arg("situ_linear_beta"), nb::arg("norm_eps"), nb::arg("out"), nb::arg("ids").none(),
      nb::arg("weights").none(), nb::arg("stream") = 0);
}

}  // namespace kimi::py
