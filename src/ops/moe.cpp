// kimi/ops/moe.h: validation and dispatch.
#include "kimi/ops/moe.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "core/check.h"
#include "core/registry.h"

namespace kimi {

namespace {
using check::dims;

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

void check_router_params(const check::Checker& c, const RouterParams& p, int64_t e_count) {
  c.range("top_k", p.top_k, 1, e_count);
  if (!std::isfinite(p.scaling)) c.fail("scaling", "a finite value", num(p.scaling));
}

void check_glu_params(const check::Checker& c, const GluParams& p) {
  if (p.act != GluAct::silu && p.act != GluAct::situ)
    c.fail("act", "silu or situ", "enum value " + std::to_string(int(p.act)));
  if (p.act == GluAct::situ) {
    if (!(p.situ_beta > 0.f) || !std::isfinite(p.situ_beta)) c.fail("situ_beta", "a finite value > 0", num(p.situ_beta));
    if (!std::isfinite(p.situ_linear_beta))
      c.fail("situ_linear_beta", "a finite value (<= 0 for identity on up)", num(p.situ_linear_beta));
  }
}

// check::weight, plus the exact input width (an MXFP4 packed width of in/2 rounds odd widths down).
void check_weight(const check::Checker& c, const std::string& name, const Weight& w, int64_t out, int64_t in) {
  check::weight(c, name, w, out, in);
  if (w.in_features() != in)
    c.fail(name + ".w", std::to_string(in) + " input features", std::to_string(w.in_features()));
}

// gate [I, d], up [I, d], down [d, I]; returns I.
int64_t check_mlp_weights(const check::Checker& c, const std::string& name, const MlpWeights& w, int64_t d) {
  check_weight(c, name + ".gate", w.gate, check::kAny, d);
  const int64_t inter = w.gate.out_features();
  check_weight(c, name + ".up", w.up, inter, d);
  check_weight(c, name + ".down", w.down, d, inter);
  return inter;
}

void check_weight_device(const check::Checker& c, const std::string& name, const Weight& w, Device dev) {
  c.device(name + ".w", w.w, dev);
  if (w.scale.present()) c.device(name + ".scale", w.scale, dev);
}

void check_mlp_device(const check::Checker& c, const std::string& name, const MlpWeights& w, Device dev) {
  check_weight_device(c, name + ".gate", w.gate, dev);
  check_weight_device(c, name + ".up", w.up, dev);
  check_weight_device(c, name + ".down", w.down, dev);
}

// Optional routing output [T, K] of the given dtype, unit-stride rows.
void check_routing_out(const check::Checker& c, const char* name, const TensorView& t, DType dt, int64_t rows,
                       int64_t k) {
  c.shape(name, t, {rows, k});
  c.dtype(name, t, {dt});
  c.inner_contiguous(name, t);
}

// First non-finite value of an f32 tensor (for statistics that need an order); fails naming it.
void check_finite(const check::Checker& c, const char* name, const TensorView& t) {
  const int64_t rows = t.ndim == 2 ? t.size(0) : 1, cols = t.size(-1);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < cols; ++i) {
      const float v = t.ndim == 2 ? *static_cast<const float*>(t.at({r, i})) : *static_cast<const float*>(t.at({i}));
      if (!std::isfinite(v))
        c.fail(name, "finite values",
               num(v) + " at " + (t.ndim == 2 ? "[" + std::to_string(r) + ", " : "[") + std::to_string(i) + "]");
    }
}
}  // namespace

void moe_router(TensorView logits, TensorView bias, const RouterParams& p, TensorView ids, TensorView weights,
                const Context& ctx) {
  check::Checker c("moe_router");
  c.rank("logits", logits, 2);
  c.float_dtype("logits", logits);
  c.inner_contiguous("logits", logits);
  const int64_t t_count = logits.size(0), e_count = logits.size(1);
  if (e_count < 1) c.fail("logits", "at least 1 expert (logits.shape[1] >= 1)", logits.shape_string());
  if (bias.present()) {
    c.shape("bias", bias, {e_count});
    c.dtype("bias", bias, {DType::f32});
    c.no_negative_strides("bias", bias);
  }
  check_router_params(c, p, e_count);
  check_routing_out(c, "ids", ids, DType::i32, t_count, p.top_k);
  check_routing_out(c, "weights", weights, DType::f32, t_count, p.top_k);
  const Device dev = c.same_device({{"logits", &logits}, {"bias", &bias}, {"ids", &ids}, {"weights", &weights}});
  dispatch(c, dev, registry().moe_router, logits, bias, p, ids, weights, ctx);
}

void moe_quantile_balance(TensorView scores, TensorView bias, int top_k, const Context& ctx) {
  check::Checker c("moe_quantile_balance");
  c.rank("scores", scores, 2);
  c.dtype("scores", scores, {DType::f32});
  c.inner_contiguous("scores", scores);
  const int64_t e_count = scores.size(1);
  if (e_count < 2) c.fail("scores", "at least 2 experts (scores.shape[1] >= 2, K < E)", scores.shape_string());
  c.shape("bias", bias, {e_count});
  c.dtype("bias", bias, {DType::f32});
  c.no_negative_strides("bias", bias);
  c.range("top_k", top_k, 1, e_count - 1);
  const Device dev = c.same_device({{"scores", &scores}, {"bias", &bias}});
  if (dev.type == DeviceType::cpu) {  // the values: readable here only for host tensors
    check_finite(c, "scores", scores);
    check_finite(c, "bias", bias);
  }
  dispatch(c, dev, registry().moe_quantile_balance, scores, bias, top_k, ctx);
}

void glu(TensorView gate, TensorView up, const GluParams& p, TensorView h, const Context& ctx) {
  check::Checker c("glu");
  c.present("gate", gate);
  if (gate.ndim < 1) c.fail("gate", "at least 1 dimension", "0");
  c.float_dtype("gate", gate);
  c.inner_contiguous("gate", gate);
  c.shape("up", up, dims(gate));
  c.float_dtype("up", up);
  c.inner_contiguous("up", up);
  c.shape("h", h, dims(gate));
  c.float_dtype("h", h);
  c.inner_contiguous("h", h);
  check_glu_params(c, p);
  const Device dev = c.same_device({{"gate", &gate}, {"up", &up}, {"h", &h}});
  dispatch(c, dev, registry().glu, gate, up, p, h, ctx);
}

void mlp(TensorView x, const MlpWeights& w, const GluParams& p, TensorView y, float beta, const Context& ctx) {
  check::Checker c("mlp");
  c.rank("x", x, 2);
  c.float_dtype("x", x);
  c.inner_contiguous("x", x);
  const int64_t d = x.size(1);
  check_mlp_weights(c, "w", w, d);
  c.shape("y", y, {x.size(0), d});
  c.float_dtype("y", y);
  c.inner_contiguous("y", y);
  if (beta != 0.f && beta != 1.f) c.fail("beta", "0 or 1", num(beta));
  check_glu_params(c, p);
  const Device dev = c.same_device({{"x", &x}, {"y", &y}});
  check_mlp_device(c, "w", w, dev);
  dispatch(c, dev, registry().mlp, x, w, p, y, beta, ctx);
}

void latent_moe(TensorView x, const LatentMoeWeights& w, const RouterParams& router, const GluParams& act,
                float norm_eps, TensorView out, TensorView ids, TensorView weights, float beta, const Context& ctx) {
  check::Checker c("latent_moe");
  c.rank("x", x, 2);
  c.float_dtype("x", x);
  c.inner_contiguous("x", x);
  const int64_t t_count = x.size(0), d = x.size(1), e_count = int64_t(w.experts.size());
  if (e_count < 1) c.fail("w.experts", "at least 1 expert", "0");
  check_weight(c, "w.router", w.router, e_count, d);
  if (w.router_bias.present()) {
    c.shape("w.router_bias", w.router_bias, {e_count});
    c.dtype("w.router_bias", w.router_bias, {DType::f32});
    c.no_negative_strides("w.router_bias", w.router_bias);
  }
  const bool has_down = w.latent_down.w.present(), has_up = w.latent_up.w.present();
  if (has_down != has_up)
    c.fail(has_down ? "w.latent_up" : "w.latent_down",
           std::string("present together with '") + (has_down ? "w.latent_down" : "w.latent_up") + "'", "absent");
  int64_t dl = d;
  if (has_down) {
    check_weight(c, "w.latent_down", w.latent_down, check::kAny, d);
    dl = w.latent_down.out_features();
    check_weight(c, "w.latent_up", w.latent_up, d, dl);
  }
  if (w.latent_norm.present()) {
    if (!has_down)
      c.fail("w.latent_norm", "absent when there is no latent projection ('w.latent_down' absent)",
             "a tensor of shape " + w.latent_norm.shape_string());
    c.shape("w.latent_norm", w.latent_norm, {dl});
    c.float_dtype("w.latent_norm", w.latent_norm);
    c.no_negative_strides("w.latent_norm", w.latent_norm);
  }
  for (int64_t e = 0; e < e_count; ++e)
    check_mlp_weights(c, "w.experts[" + std::to_string(e) + "]", w.experts[size_t(e)], dl);
  if (w.shared) check_mlp_weights(c, "w.shared", *w.shared, d);
  check_router_params(c, router, e_count);
  check_glu_params(c, act);
  if (!(norm_eps >= 0.f) || !std::isfinite(norm_eps)) c.fail("norm_eps", "a finite value >= 0", num(norm_eps));
  c.shape("out", out, {t_count, d});
  c.float_dtype("out", out);
  c.inner_contiguous("out", out);
  if (ids.present()) check_routing_out(c, "ids", ids, DType::i32, t_count, router.top_k);
  if (weights.present()) check_routing_out(c, "weights", weights, DType::f32, t_count, router.top_k);
  if (beta != 0.f && beta != 1.f) c.fail("beta", "0 or 1", num(beta));
  const Device dev = c.same_device({{"x", &x}, {"out", &out}, {"ids", &ids}, {"weights", &weights},
                                    {"w.router_bias", &w.router_bias}, {"w.latent_norm", &w.latent_norm}});
  check_weight_device(c, "w.router", w.router, dev);
  if (has_down) {
    check_weight_device(c, "w.latent_down", w.latent_down, dev);
    check_weight_device(c, "w.latent_up", w.latent_up, dev);
  }
  for (int64_t e = 0; e < e_count; ++e)
    check_mlp_device(c, "w.experts[" + std::to_string(e) + "]", w.experts[size_t(e)], dev);
  if (w.shared) check_mlp_device(c, "w.shared", *w.shared, dev);
  dispatch(c, dev, registry().latent_moe, x, w, router, act, norm_eps, out, ids, weights, beta, ctx);
}

}  // namespace kimi
