// kimi/model/generate.h: token generation on a Model: batched prefill, then one decode step per token
// for every unfinished sequence, with greedy or seeded temperature / top-k / top-p sampling.
//
// Sampling is the operator sample_tokens (kimi/ops/sample.h), run on the device of the model's head: on a GPU the
// logits never leave it (only the token ids are copied back). Its draws are counter-based: the k-th new token
// (k = 0 for the prefill's) of prompt n is drawn from (seed, n, k), so a seeded generation returns the same tokens
// on the CPU and on a GPU (up to the models' own float differences in the logits), in any batch. This replaced a
// std::mt19937_64 per sequence: seeded non-greedy generations return other tokens than before it (same
// distribution); greedy generations are unchanged.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "kimi/context.h"
#include "kimi/model/model.h"

namespace kimi::model {

struct SamplingParams {
  float temperature = 0.f;  // 0: greedy (argmax, lowest id on ties); > 0: sample softmax(logits / temperature)
  int top_k = 0;            // keep the k most likely tokens (0: all)
  float top_p = 1.f;        // then the smallest set whose probability reaches top_p (nucleus), in (0, 1]
  uint64_t seed = 0;        // prompt n's k-th new token is drawn from (seed, n, k) (kimi/ops/sample.h)
};

// The longest sequence (prompt + new tokens) generate() accepts for a model: 2^20 = 1,048,576 tokens, the
// `model_max_length` Kimi-Linear publishes. Config carries no context field (config.json's length fields are
// not parsed, and the MLA layers use no positional encoding, so nothing in the weights bounds it).
int64_t context_limit(const Config& c);

struct GenerateOptions {
  int64_t max_new_tokens = 16;        // per sequence, in [1, context_limit - longest prompt]
  std::vector<int32_t> stop_tokens;   // token ids in [0, vocab_size); a generated stop token ends its
                                      // sequence (and is included)
  SamplingParams sampling;
};

// Expert parallelism (docs/ep.md, src/dist/model.h: EpModel::lockstep), all three set: `moe` runs every step's MoE
// layers (ForwardOptions::moe); the ranks step in lockstep: after the prefill and after each decode step,
// any_active(this rank still generates) must return whether any rank does (a collective), and while this rank has
// nothing left but others do, generate calls idle() (one step without tokens) instead of a decode step.
struct GenerateLockstep {
  std::function<void(int64_t layer, TensorView x, TensorView y)> moe;
  std::function<bool(bool local_active)> any_active;
  std::function<void()> idle;
};

enum class FinishReason : uint8_t { length, stop };

struct GenerateResult {
  std::vector<std::vector<int32_t>> tokens;  // generated tokens per prompt (prompts not included)
  std::vector<FinishReason> finish;
  int64_t prefill_tokens = 0, decode_tokens = 0;  // tokens through the model in each phase
  double prefill_seconds = 0, decode_seconds = 0;
  size_t cache_bytes = 0;  // the cache's size at the end (after any growth)
};

// Generates for every prompt (token ids in [0, vocab_size), each >= 1 token) in one batch. Validates every
// option and prompt first (kimi::Error naming the field). The cache starts at the longest prompt + up to 256
// new tokens per sequence and doubles as sequences grow (Cache::reserve), so a large max_new_tokens that a
// stop token cuts short costs no memory; a cache that outgrows memory is a kimi::Error with the bytes.
// The steps run in the model's plan: the prefill (all prompts) plans the model for itself unless Model::plan set
// limits (then prompts beyond them are a kimi::Error before anything runs), so no decode step allocates; the
// activation dtype is the model's (Model::activation_dtype).
// ep: expert parallelism in lockstep with the other ranks (GenerateLockstep), or null.
GenerateResult generate(const Model& model, std::span<const std::vector<int32_t>> prompts,
                        const GenerateOptions& opt, const Context& ctx = {}, const GenerateLockstep* ep = nullptr);

}  // namespace kimi::model
