// Implementation of kimi/model/generate.h.
#include "kimi/model/generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <string>

#include "kimi/device.h"
#include "kimi/error.h"

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

}  // namespace

int64_t context_limit(const Config&) { return int64_t(1) << 20; }

int32_t sample_token(std::span<const float> logits, const SamplingParams& p, std::mt19937_64& rng) {
  check_params(p);
  if (logits.empty()) throw Error("sampling: logits: expected at least one value, got none");
  for (size_t i = 0; i < logits.size(); ++i)
    if (std::isnan(logits[i])) throw Error("sampling: logits: NaN at index " + std::to_string(i));
  const float top_logit = *std::max_element(logits.begin(), logits.end());
  if (!std::isfinite(top_logit))
    throw Error(std::string("sampling: logits: expected a finite maximum (-inf masks a token), got ") +
                (top_logit > 0 ? "+inf" : "every logit -inf"));
  if (p.temperature == 0.f) return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());

  // Candidates by descending logit (ties: lower id first), cut to top_k.
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  const size_t k = p.top_k > 0 ? std::min(size_t(p.top_k), ids.size()) : ids.size();
  auto before = [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b); };
  std::partial_sort(ids.begin(), ids.begin() + std::ptrdiff_t(k), ids.end(), before);
  ids.resize(k);
  // Softmax at the temperature (fp64), then the nucleus: the shortest prefix whose mass reaches top_p.
  std::vector<double> prob(k);
  const double top = logits[size_t(ids[0])];
  double sum = 0;
  for (size_t i = 0; i < k; ++i) sum += prob[i] = std::exp((double(logits[size_t(ids[i])]) - top) / p.temperature);
  size_t keep = k;
  if (p.top_p < 1.f) {
    double mass = 0;
    for (size_t i = 0; i < k; ++i) {
      mass += prob[i] / sum;
      if (mass >= double(p.top_p)) {
        keep = i + 1;
        break;
      }
    }
  }
  const double total = std::accumulate(prob.begin(), prob.begin() + std::ptrdiff_t(keep), 0.0);
  double u = std::uniform_real_distribution<double>(0.0, total)(rng);
  for (size_t i = 0; i < keep; ++i) {
    if (u < prob[i]) return ids[i];
    u -= prob[i];
  }
  return ids[keep - 1];
}

GenerateResult generate(const Model& model, std::span<const std::vector<int32_t>> prompts, const GenerateOptions& opt,
                        const Context& ctx) {
  check_params(opt.sampling);
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
  std::vector<std::mt19937_64> rng;
  for (int64_t n = 0; n < N; ++n) {
    std::seed_seq seq{uint32_t(opt.sampling.seed), uint32_t(opt.sampling.seed >> 32), uint32_t(n), uint32_t(uint64_t(n) >> 32)};
    rng.emplace_back(seq);
  }

  GenerateResult r;
  r.tokens.resize(size_t(N));
  r.finish.assign(size_t(N), FinishReason::length);
  std::vector<int64_t> active(slots);  // sequences still generating (their slot = their index)
  auto take = [&](const Tensor& logits, std::span<const int64_t> seqs) {  // row i: sequence seqs[i]
    std::vector<int64_t> still;
    for (size_t i = 0; i < seqs.size(); ++i) {
      const int64_t n = seqs[i];
      const std::span<const float> row(logits.data_as<float>() + int64_t(i) * V, size_t(V));
      const int32_t t = sample_token(row, opt.sampling, rng[size_t(n)]);
      r.tokens[size_t(n)].push_back(t);
      if (std::find(opt.stop_tokens.begin(), opt.stop_tokens.end(), t) != opt.stop_tokens.end()) {
        r.finish[size_t(n)] = FinishReason::stop;
      } else if (int64_t(r.tokens[size_t(n)].size()) < opt.max_new_tokens) {
        still.push_back(n);
      }
    }
    return still;
  };

  // The prefill is the largest step: its forward plans the model for it (unless Model::plan fixed larger limits),
  // so the decode steps run in the planned arenas, and every step writes its logits into one reused host buffer.
  const StepPlanInfo planned = model.planned();
  if (planned.explicit_plan && (planned.max_tokens < int64_t(tokens.size()) || planned.max_seqs < N))
    throw Error("generate: prompts: expected at most " + std::to_string(planned.max_tokens) + " tokens in at most " +
                std::to_string(planned.max_seqs) + " prompts (the model's Model::plan), got " +
                std::to_string(tokens.size()) + " tokens in " + std::to_string(N));
  const Tensor logits = Tensor::uninitialized(DType::f32, {N, V});
  const PinnedHost pinned(logits.view());  // each step's logits copy runs at the link's rate (kimi/device.h)
  auto t0 = std::chrono::steady_clock::now();
  forward_into(model, cache, {tokens, cu, slots}, logits, {}, ctx);
  r.prefill_seconds = seconds_since(t0);
  r.prefill_tokens = int64_t(tokens.size());
  active = take(logits, active);

  t0 = std::chrono::steady_clock::now();
  while (!active.empty()) {
    std::vector<int32_t> step;
    std::vector<int64_t> off{0};
    int64_t room = 0;  // the longest any active slot becomes after this step
    for (int64_t n : active) {
      step.push_back(r.tokens[size_t(n)].back()), off.push_back(int64_t(step.size()));
      room = std::max(room, cache.length(n) + 1);
    }
    if (room > cache.max_len()) cache.reserve(std::min(full, std::max(room, 2 * cache.max_len())));
    forward_into(model, cache, {step, off, active}, logits.view().slice(0, 0, int64_t(active.size())), {}, ctx);
    r.decode_tokens += int64_t(step.size());
    active = take(logits, active);
  }
  r.decode_seconds = seconds_since(t0);
  r.cache_bytes = cache.bytes();
  return r;
}

}  // namespace kimi::model
