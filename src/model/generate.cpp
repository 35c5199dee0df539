// Implementation of kimi/model/generate.h.
#include "kimi/model/generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <string>

#include "kimi/device.h"
#include "kimi/error.h"
#include "kimi/ops/sample.h"

namespace kimi::model {
namespace {

void check_params(const SamplingParams& p) {
  if (!(p.temperature >= 0.f) || !std::isfinite(p.temperature))
    throw Error("sampling: temperature: expected a finite value >= 0, got " + std::to_string(p.temperature));
  if (p.top_k < 0) throw Error("sampling: top_k: expected >= 0 (0 = all), got " + std::to_string(p.top_k));
  if (!(p.top_p > 0.f && p.top_p <= 1.f))
    throw Error("sampling: top_p: expected a value in (0, 1], got " + std::to_string(p.top_p));
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The cache starts with room for this many new tokens per sequence (then doubles): small enough that a
// generation a stop token ends early allocates little, large enough that short runs never grow.
constexpr int64_t kFirstReserve = 256;

// The per-row inputs of sample_tokens (kimi/ops/sample.h) for up to N rows, in one host buffer and, when the head
// runs on a GPU, its device twin (one copy per step): seed, sequence, step (i64), temperature, top_p (f32),
// top_k (i32), each an [N] array, of which a step uses the first rows.
class SampleInputs {
 public:
  SampleInputs(int64_t N, Device dev) : N_(N), dev_(dev), host_(DType::u8, {N * kRowBytes}) {
    if (!(dev == Device::cpu())) dev_buf_ = Tensor::uninitialized(DType::u8, {N * kRowBytes}, dev);
  }
  // Row i samples sequence seqs[i] at its step steps[i]; every row shares p.
  SampleParams fill(const SamplingParams& p, std::span<const int64_t> seqs, std::span<const int64_t> steps,
                    const Context& ctx) {
    const int64_t A = int64_t(seqs.size());
    for (int64_t i = 0; i < A; ++i) {
      i64(host_, 0)[i] = int64_t(p.seed), i64(host_, 1)[i] = seqs[size_t(i)], i64(host_, 2)[i] = steps[size_t(i)];
      f32(host_, 0)[i] = p.temperature, f32(host_, 1)[i] = p.top_p, i32(host_)[i] = p.top_k;
    }
    if (!dev_buf_.data()) return views(host_, Device::cpu(), A);
    copy(dev_buf_, host_, ctx);
    return views(dev_buf_, dev_, A);
  }
  SampleParams host_views(int64_t A) { return views(host_, Device::cpu(), A); }

 private:
  static constexpr int64_t kRowBytes = 3 * 8 + 3 * 4;
  int64_t* i64(const Tensor& b, int64_t k) const { return b.data_as<int64_t>() + k * N_; }
  float* f32(const Tensor& b, int64_t k) const { return reinterpret_cast<float*>(b.data_as<int64_t>() + 3 * N_) + k * N_; }
  int32_t* i32(const Tensor& b) const { return reinterpret_cast<int32_t*>(f32(b, 2)); }
  SampleParams views(const Tensor& b, Device d, int64_t A) const {
    SampleParams s;
    s.seed = TensorView(i64(b, 0), DType::i64, {A}, d);
    s.sequence = TensorView(i64(b, 1), DType::i64, {A}, d);
    s.step = TensorView(i64(b, 2), DType::i64, {A}, d);
    s.temperature = TensorView(f32(b, 0), DType::f32, {A}, d);
    s.top_p = TensorView(f32(b, 1), DType::f32, {A}, d);
    s.top_k = TensorView(i32(b), DType::i32, {A}, d);
    return s;
  }
  int64_t N_;
  Device dev_;
  Tensor host_, dev_buf_;
};

// A device row sample_tokens refused (token -1: a NaN or no finite maximum; the parameters were checked): the row
// is sampled again on the host, whose checks throw the operator's error naming what is wrong.
[[noreturn]] void refuse_row(TensorView row, const SampleParams& host, int64_t i, const Context& ctx) {
  const Tensor x(DType::f32, {1, row.size(1)});
  copy(x, row, ctx);
  SampleParams one = host;
  for (TensorView* t : {&one.temperature, &one.top_k, &one.top_p, &one.seed, &one.sequence, &one.step})
    *t = t->slice(0, i, i + 1);
  int32_t token = 0;
  sample_tokens(x, one, TensorView(&token, DType::i32, {1}), ctx);
  throw Error("sample_tokens: row " + std::to_string(i) + " of the logits on " + to_string(row.device) +
              ": refused on the device (token -1), accepted on the host (token " + std::to_string(token) + ")");
}

}  // namespace

int64_t context_limit(const Config&) { return int64_t(1) << 20; }

GenerateResult generate(const Model& model, std::span<const std::vector<int32_t>> prompts, const GenerateOptions& opt,
                        const Context& ctx, const GenerateLockstep* ep) {
  check_params(opt.sampling);
  if (ep && (!ep->moe || !ep->any_active || !ep->idle))
    throw Error(std::string("generate: ep: expected moe, any_active and idle all set, got moe ") +
                (ep->moe ? "set" : "unset") + ", any_active " + (ep->any_active ? "set" : "unset") + ", idle " +
                (ep->idle ? "set" : "unset"));
  const Config& c = model.config();
  const int64_t V = c.vocab_size, limit = context_limit(c);
  if (prompts.empty()) throw Error("generate: prompts: expected at least one prompt, got none");
  const int64_t N = int64_t(prompts.size());
  int64_t longest = 0;
  std::vector<int32_t> tokens;
  std::vector<int64_t> cu{0}, slots;
  for (int64_t n = 0; n < N; ++n) {
    const std::vector<int32_t>& p = prompts[size_t(n)];
    const std::string name = "generate: prompts[" + std::to_string(n) + "]";
    if (p.empty()) throw Error(name + ": expected >= 1 token, got 0");
    for (size_t i = 0; i < p.size(); ++i)
      if (p[i] < 0 || p[i] >= V)
        throw Error(name + "[" + std::to_string(i) + "]: expected a token id in [0, vocab_size = " + std::to_string(V) +
                    "), got " + std::to_string(p[i]));
    tokens.insert(tokens.end(), p.begin(), p.end());
    cu.push_back(int64_t(tokens.size()));
    slots.push_back(n);
    longest = std::max(longest, int64_t(p.size()));
  }
  if (longest >= limit)
    throw Error("generate: prompts: expected fewer than the context limit of " + std::to_string(limit) +
                " tokens per prompt (room for one new token), got " + std::to_string(longest));
  if (opt.max_new_tokens < 1 || opt.max_new_tokens > limit - longest)
    throw Error("generate: max_new_tokens: expected a value in [1, " + std::to_string(limit - longest) +
                "] (the context limit of " + std::to_string(limit) + " tokens less the longest prompt, " +
                std::to_string(longest) + "), got " + std::to_string(opt.max_new_tokens));
  for (size_t i = 0; i < opt.stop_tokens.size(); ++i)
    if (opt.stop_tokens[i] < 0 || opt.stop_tokens[i] >= V)
      throw Error("generate: stop_tokens[" + std::to_string(i) + "]: expected a token id in [0, vocab_size = " +
                  std::to_string(V) + "), got " + std::to_string(opt.stop_tokens[i]));
  // A sequence holds its prompt and all but its last new token; the cache grows towards `full` on demand.
  const int64_t full = longest + opt.max_new_tokens;
  Cache cache(model, N, std::min(full, longest + kFirstReserve));  // pools where the model's mixers run

  // The prefill is the largest step: its forward plans the model for it (unless Model::plan fixed larger limits),
  // so the decode steps run in the planned arenas, and every step writes its logits into one reused buffer.
  const StepPlanInfo planned = model.planned();
  if (planned.explicit_plan && (planned.max_tokens < int64_t(tokens.size()) || planned.max_seqs < N))
    throw Error("generate: prompts: expected at most " + std::to_string(planned.max_tokens) + " tokens in at most " +
                std::to_string(planned.max_seqs) + " prompts (the model's Model::plan), got " +
                std::to_string(tokens.size()) + " tokens in " + std::to_string(N));

  GenerateResult r;
  r.tokens.resize(size_t(N));
  r.finish.assign(size_t(N), FinishReason::length);
  std::vector<int64_t> active(slots);  // sequences still generating (their slot = their index)
  // Sampling (kimi/ops/sample.h) on the head's device: on a GPU the logits stay there and only the N token ids
  // come back. Sequence n's k-th new token (k from 0) is drawn with (seed, n, k) on every device.
  const Device dh = model.placement().head;
  const bool on_host = dh == Device::cpu();
  const Tensor logits = Tensor::uninitialized(DType::f32, {N, V}, dh);
  SampleInputs inputs(N, dh);
  const Tensor picked(DType::i32, {N}, dh), back = on_host ? Tensor() : Tensor(DType::i32, {N});
  const TensorView picked_host = on_host ? picked.view() : back.view();
  std::vector<int64_t> steps;
  auto take = [&](std::span<const int64_t> seqs) {  // row i: sequence seqs[i]
    const int64_t A = int64_t(seqs.size());
    steps.clear();
    for (int64_t n : seqs) steps.push_back(int64_t(r.tokens[size_t(n)].size()));
    const TensorView rows = logits.view().slice(0, 0, A);
    sample_tokens(rows, inputs.fill(opt.sampling, seqs, steps, ctx), picked.view().slice(0, 0, A), ctx);
    if (!on_host) copy(picked_host.slice(0, 0, A), picked.view().slice(0, 0, A), ctx);
    const int32_t* got = static_cast<const int32_t*>(picked_host.data);
    std::vector<int64_t> still;
    for (int64_t i = 0; i < A; ++i) {
      const int64_t n = seqs[size_t(i)];
      const int32_t t = got[i];
      if (t < 0) refuse_row(rows.slice(0, i, i + 1), inputs.host_views(A), i, ctx);
      r.tokens[size_t(n)].push_back(t);
      if (std::find(opt.stop_tokens.begin(), opt.stop_tokens.end(), t) != opt.stop_tokens.end()) {
        r.finish[size_t(n)] = FinishReason::stop;
      } else if (int64_t(r.tokens[size_t(n)].size()) < opt.max_new_tokens) {
        still.push_back(n);
      }
    }
    return still;
  };

  auto t0 = std::chrono::steady_clock::now();
  ForwardOptions fopt;
  if (ep) fopt.moe = ep->moe;
  forward_into(model, cache, {tokens, cu, slots}, logits, fopt, ctx);
  r.prefill_seconds = seconds_since(t0);
  r.prefill_tokens = int64_t(tokens.size());
  active = take(active);

  t0 = std::chrono::steady_clock::now();
  while (ep ? ep->any_active(!active.empty()) : !active.empty()) {
    if (active.empty()) {  // other ranks still generate: a step without tokens
      ep->idle();
      continue;
    }
    std::vector<int32_t> step;
    std::vector<int64_t> off{0};
    int64_t room = 0;  // the longest any active slot becomes after this step
    for (int64_t n : active) {
      step.push_back(r.tokens[size_t(n)].back()), off.push_back(int64_t(step.size()));
      room = std::max(room, cache.length(n) + 1);
    }
    if (room > cache.max_len()) cache.reserve(std::min(full, std::max(room, 2 * cache.max_len())));
    forward_into(model, cache, {step, off, active}, logits.view().slice(0, 0, int64_t(active.size())), fopt, ctx);
    r.decode_tokens += int64_t(step.size());
    active = take(active);
  }
  r.decode_seconds = seconds_since(t0);
  r.cache_bytes = cache.bytes();
  return r;
}

}  // namespace kimi::model
