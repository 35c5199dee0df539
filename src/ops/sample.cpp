// kimi/ops/sample.h: validation and dispatch. Host parameters and logits are read and checked here (the CPU
// backend then samples valid rows only); CUDA ones only by the kernel (kimi/ops/sample.h: token -1).
#include "kimi/ops/sample.h"

#include <cmath>
#include <sstream>
#include <string>

#include "core/check.h"
#include "core/registry.h"

namespace kimi {
namespace {

std::string num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

std::string in_row(double v, int64_t n) { return num(v) + " in row " + std::to_string(n); }

float logit(const TensorView& t, int64_t n, int64_t i) {
  const char* row = static_cast<const char*>(t.data) + size_t(n * t.stride(0)) * t.element_size();
  if (t.dtype == DType::bf16) return bf16_to_f32(reinterpret_cast<const uint16_t*>(row)[i]);
  return reinterpret_cast<const float*>(row)[i];
}

template <class T>
T at(const TensorView& t, int64_t n) {
  return static_cast<const T*>(t.data)[n * t.stride(0)];
}

// Host values: every parameter in range, every row without NaN and with a finite maximum.
void check_values(const check::Checker& c, TensorView logits, const SampleParams& p) {
  const int64_t N = logits.size(0), V = logits.size(1);
  for (int64_t n = 0; n < N; ++n) {
    const float t = at<float>(p.temperature, n), top_p = at<float>(p.top_p, n);
    const int32_t k = at<int32_t>(p.top_k, n);
    if (!(t >= 0.f) || !std::isfinite(t)) c.fail("temperature", "a finite value >= 0 (0 = greedy)", in_row(t, n));
    if (k < 0) c.fail("top_k", "a value >= 0 (0 = all tokens)", in_row(k, n));
    if (!(top_p > 0.f && top_p <= 1.f)) c.fail("top_p", "a value in (0, 1]", in_row(top_p, n));
    float m = -INFINITY;
    for (int64_t i = 0; i < V; ++i) {
      const float x = logit(logits, n, i);
      if (std::isnan(x)) c.fail("logits", "no NaN", "NaN in row " + std::to_string(n) + " at index " + std::to_string(i));
      m = std::max(m, x);
    }
    if (!std::isfinite(m))
      c.fail("logits", "a finite maximum in every row (-inf masks a token)",
             std::string(m > 0 ? "+inf" : "every logit -inf") + " in row " + std::to_string(n));
  }
}

}  // namespace

void sample_tokens(TensorView logits, const SampleParams& params, TensorView tokens, const Context& ctx) {
  check::Checker c("sample_tokens");
  c.rank("logits", logits, 2);
  c.dtype("logits", logits, {DType::f32, DType::bf16});
  c.inner_contiguous("logits", logits);
  c.no_negative_strides("logits", logits);
  const int64_t N = logits.size(0), V = logits.size(1);
  if (V < 1 || V >= (int64_t(1) << 24))
    c.fail("logits", "a vocabulary of 1 to 2^24 - 1 tokens (columns)", std::to_string(V));
  const std::pair<const char*, const TensorView*> args[] = {{"temperature", &params.temperature},
                                                            {"top_k", &params.top_k},
                                                            {"top_p", &params.top_p},
                                                            {"seed", &params.seed},
                                                            {"sequence", &params.sequence},
                                                            {"step", &params.step}};
  const DType dtypes[] = {DType::f32, DType::i32, DType::f32, DType::i64, DType::i64, DType::i64};
  for (size_t i = 0; i < std::size(args); ++i) {
    c.rank(args[i].first, *args[i].second, 1);
    c.dtype(args[i].first, *args[i].second, {dtypes[i]});
    c.shape(args[i].first, *args[i].second, {N});
    c.no_negative_strides(args[i].first, *args[i].second);
  }
  c.rank("tokens", tokens, 1);
  c.dtype("tokens", tokens, {DType::i32});
  c.shape("tokens", tokens, {N});
  c.contiguous("tokens", tokens);
  const Device dev = c.same_device({{"logits", &logits},
                                    {"temperature", &params.temperature},
                                    {"top_k", &params.top_k},
                                    {"top_p", &params.top_p},
                                    {"seed", &params.seed},
                                    {"sequence", &params.sequence},
                                    {"step", &params.step},
                                    {"tokens", &tokens}});
  c.disjoint("tokens", tokens, "logits", logits);
  for (const auto& [name, t] : args) c.disjoint("tokens", tokens, name, *t);
  if (dev.type == DeviceType::cpu) check_values(c, logits, params);
  dispatch(c, dev, registry().sample_tokens, logits, params, tokens, ctx);
}

}  // namespace kimi
