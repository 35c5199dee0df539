// `kimi generate`: checks every flag (against config.json for the vocabulary and the context limit), then
// loads the checkpoint, generates for a batch of prompts, prints the tokens and the speed.
// Prompts are token ids (--prompt) or text (--text, --text-file) encoded with the checkpoint's tokenizer as user
// text (special-token strings stay text, text/tokenizer.h); then the generated ids are also printed as text
// (tiktoken's decode: invalid UTF-8 as U+FFFD, text/stream_decoder.h). The text is printed when generation ends:
// generate() (kimi/model/generate.h) returns the batch's tokens at the end and offers no per-token callback.
// --json prints one JSON object on stdout and the report on stderr.
#include <fmt/core.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kimi/device.h"
#include "kimi/error.h"
#include "kimi/model/generate.h"
#include "ep_cli.h"
#include "generate_ep.h"
#include "kimi/model_cmds.h"
#include "model/loader_io.h"
#include "text/stream_decoder.h"
#include "text/tokenizer.h"

namespace kimi::cli {
namespace {

std::vector<int32_t> parse_ids(const std::string& s, size_t which) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i <= s.size()) {
    const size_t j = std::min(s.find(',', i), s.size());
    const std::string part = s.substr(i, j - i);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    const bool digits = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || used != part.size() || v < 0 || v > INT32_MAX)
      throw Error("generate: --prompt #" + std::to_string(which + 1) +
                  ": expected comma-separated non-negative token ids, got '" + s + "'");
    ids.push_back(int32_t(v));
    i = j + 1;
  }
  return ids;
}

std::string join(const std::vector<int32_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? " " : "") + std::to_string(v[i]);
  return s;
}

constexpr uint64_t kMaxTextFileBytes = uint64_t(1) << 30;

// Every flag of `kimi generate`, checked before the checkpoint is loaded; the message names the flag.
struct CheckedFlags {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::string> texts;          // the prompts as text (text prompts only)
  std::optional<text::Tokenizer> tokenizer;  // loaded for text prompts
  Device device;
  std::optional<DType> dtype;  // unset: the model's default for its device
  kimi::model::GenerateOptions gen;
};

// Text prompts: each --text, then each --text-file, encoded as user text (no specials) with dir's tokenizer.
void encode_text_prompts(const GenerateCmdOptions& opt, int64_t vocab, CheckedFlags& f) {
  try {
    f.tokenizer.emplace(text::Tokenizer::load(opt.dir));
  } catch (const Error& e) {  // "tokenizer: DIR/tiktoken.model: cannot open: no such file", ...
    throw Error(std::string("generate: ") + (opt.texts.empty() ? "--text-file" : "--text") + ": " + e.what() +
                " (a text prompt needs the checkpoint's tiktoken.model and tokenizer_config.json)");
  }
  if (int64_t(f.tokenizer->vocab_size()) > vocab)
    throw Error("generate: --text: expected a tokenizer of at most " + std::to_string(vocab) +
                " ids (config.json's vocab_size), got " + std::to_string(f.tokenizer->vocab_size()) + " in " + opt.dir);
  std::vector<std::pair<std::string, std::string>> items;  // (flag, text)
  for (size_t i = 0; i < opt.texts.size(); ++i) items.emplace_back("--text #" + std::to_string(i + 1), opt.texts[i]);
  for (const std::string& path : opt.text_files)
    items.emplace_back("--text-file " + path, model::read_text_file(path, "generate: --text-file: ", kMaxTextFileBytes));
  for (auto& [flag, t] : items) {
    std::vector<uint32_t> ids;
    try {
      ids = f.tokenizer->encode(t, text::AllowedSpecials::none());
    } catch (const Error& e) {  // invalid UTF-8, with the byte offset
      throw Error("generate: " + flag + ": " + e.what());
    }
    if (ids.empty()) throw Error("generate: " + flag + ": expected text of at least one token, got an empty text");
    f.prompts.emplace_back(ids.begin(), ids.end());
    f.texts.push_back(std::move(t));
  }
}

CheckedFlags check_flags(const GenerateCmdOptions& opt) {
  using namespace kimi::model;
  CheckedFlags f;
  const bool text = !opt.texts.empty() || !opt.text_files.empty();
  if (text && !opt.prompts.empty())
    throw Error("generate: expected prompts as --prompt token ids or as --text / --text-file, got both");
  if (!text && opt.prompts.empty())
    throw Error("generate: expected a prompt: --prompt token ids, --text or --text-file, got none");
  for (size_t i = 0; i < opt.prompts.size(); ++i) f.prompts.push_back(parse_ids(opt.prompts[i], i));
  f.device = parse_device(opt.device, "generate: --device");
  if (opt.dtype == "f32") {
    f.dtype = DType::f32;
  } else if (opt.dtype == "bf16") {
    f.dtype = DType::bf16;
  } else if (opt.dtype != "auto") {
    throw Error("generate: --dtype: expected auto (bf16 on a GPU, f32 on the CPU), f32 or bf16, got '" + opt.dtype + "'");
  }
  if (!(opt.temperature >= 0.f) || !std::isfinite(opt.temperature))
    throw Error("generate: --temperature: expected a finite value >= 0 (0 = greedy), got " + fmt::format("{}", opt.temperature));
  if (opt.top_k < 0) throw Error("generate: --top-k: expected >= 0 (0 = all tokens), got " + std::to_string(opt.top_k));
  if (!(opt.top_p > 0.f && opt.top_p <= 1.f))
    throw Error("generate: --top-p: expected a value in (0, 1], got " + fmt::format("{}", opt.top_p));
  const uint64_t seed = parse_seed(opt.seed, "generate: --seed");
  if (opt.threads < 0 || opt.threads > max_cpu_threads())
    throw Error("generate: --threads: expected a value in [0, " + std::to_string(max_cpu_threads()) +
                "] (0 = OpenMP's default; at most the " + std::to_string(max_cpu_threads()) +
                " CPUs of this machine), got " + std::to_string(opt.threads));
  // The vocabulary and the context limit come from config.json (read again, with the weights, by Model).
  const Config c = load_model_config(opt.dir);
  const int64_t V = c.vocab_size, limit = context_limit(c);
  if (text) encode_text_prompts(opt, V, f);
  const std::string longest_prompt = text ? "the longest text prompt" : "the longest --prompt";
  size_t longest = 0;
  for (size_t n = 0; n < f.prompts.size(); ++n) {
    const std::vector<int32_t>& p = f.prompts[n];
    for (size_t i = 0; i < p.size(); ++i)
      if (p[i] >= V)
        throw Error("generate: --prompt #" + std::to_string(n + 1) + ": expected token ids in [0, " + std::to_string(V) +
                    ") (the vocabulary of " + opt.dir + "), got " + std::to_string(p[i]) + " at position " +
                    std::to_string(i + 1));
    longest = std::max(longest, p.size());
  }
  if (int64_t(longest) >= limit)
    throw Error(std::string("generate: ") + (text ? "--text" : "--prompt") + ": expected fewer than " +
                std::to_string(limit) + " tokens (the context limit, less one new token), got " +
                std::to_string(longest));
  if (opt.max_tokens < 1 || opt.max_tokens > limit - int64_t(longest))
    throw Error("generate: --max-tokens: expected a value in [1, " + std::to_string(limit - int64_t(longest)) +
                "] (the context limit of " + std::to_string(limit) + " tokens less " + longest_prompt + ", " +
                std::to_string(longest) + "), got " + std::to_string(opt.max_tokens));
  for (int32_t t : opt.stop)
    if (t < 0 || t >= V)
      throw Error("generate: --stop: expected token ids in [0, " + std::to_string(V) + ") (the vocabulary of " + opt.dir +
                  "), got " + std::to_string(t));
  check_ep_flag("generate", opt.ep, f.device, opt.device);
  check_ep_flags(opt);
  f.gen.max_new_tokens = opt.max_tokens;
  f.gen.stop_tokens = opt.stop;
  f.gen.sampling = {opt.temperature, opt.top_k, opt.top_p, seed};
  return f;
}

// Loads the model, generates and prints the report (comm: the --ep transport, or null).
int generate_and_report(const GenerateCmdOptions& opt, const CheckedFlags& f, dist::Comm* comm) {
  using namespace kimi::model;
  const std::vector<std::vector<int32_t>>& prompts = f.prompts;
  const Device dev = f.device;
  // --ep N: one process per rank under mpirun; rank 0 reports, the other ranks' report goes to /dev/null.
  const ReportOut report(comm, opt.json ? stderr : stdout, "generate");  // --json: the JSON alone on stdout
  const bool quiet = report.quiet();
  std::FILE* const out = report.get();
  // --ep: the experts' placement; with --ep-resident held, only this rank's experts are bound from the checkpoint.
  std::optional<dist::Placement> ep_pl;
  ExpertFilter keep;
  if (comm) {
    ep_pl = ep_placement(opt, comm->size(), int(load_model_config(opt.dir).num_experts));
    if (opt.ep_resident == "held") {
      std::vector<char> held(size_t(ep_pl->experts), 0);
      for (int32_t e : ep_pl->held_by(comm->rank())) held[size_t(e)] = 1;
      keep = [held](int64_t, int64_t e) { return held[size_t(e)] != 0; };
    }
  }
  Model model(opt.dir, dev, {}, keep);  // notes which blocks fall back to the CPU (stderr, kimi/log.h)
  if (f.dtype) model.set_activation_dtype(*f.dtype);
  const Config& c = model.config();
  fmt::print(out, "model      {} ({} layers, hidden {}, vocab {})\n", opt.dir, c.num_hidden_layers, c.hidden_size,
             c.vocab_size);
  fmt::print(out, "placement  {}\n", model.placement().summary());
  fmt::print(out, "activations {} (residual stream, norms' statistics, router, KDA state, caches and logits f32)\n",
             dtype_name(model.activation_dtype()));
  if (dev.type != DeviceType::cpu)
    fmt::print(out, "device     {:.2f} MiB of weights uploaded to the GPU\n", double(model.device_weight_bytes()) / (1 << 20));
  const GenerateOptions& g = f.gen;
  Context ctx;
  ctx.cpu_threads = opt.threads;
  GenerateResult r;
  EpRun ep_run;
  auto run = [&](const GenerateOptions& go) {
    if (!comm) return generate(model, prompts, go, ctx);
    ep_run = generate_ep(*comm, model, prompts, go, ctx, opt, *ep_pl);
    return ep_run.result;
  };
  try {
    if (opt.warmup) {
      GenerateOptions w = g;
      w.max_new_tokens = std::min<int64_t>(g.max_new_tokens, 2);
      w.stop_tokens.clear();
      run(w);
    }
    r = run(g);
  } catch (const Error& e) {  // a cache that outgrew memory: say which flags size it
    if (std::string(e.what()).rfind("Cache: ", 0) != 0) throw;
    throw Error(std::string("generate: ") + e.what() + " (fewer --prompt or a smaller --max-tokens need less)");
  }
  // The generated ids as text (text prompts): tiktoken's decode, invalid UTF-8 as U+FFFD.
  std::vector<std::string> generated(prompts.size());
  if (f.tokenizer) {
    for (size_t n = 0; n < prompts.size(); ++n) {
      text::StreamDecoder d(*f.tokenizer);
      for (int32_t t : r.tokens[n]) generated[n] += d.push(uint32_t(t));
      generated[n] += d.finish();
    }
  }
  auto quoted = [](const std::string& s) { return nlohmann::json(s).dump(); };
  for (size_t n = 0; n < prompts.size(); ++n) {
    fmt::print(out, "[{}] prompt {} -> {} ({})\n", n, join(prompts[n]), join(r.tokens[n]),
               r.finish[n] == FinishReason::stop ? "stop token" : "max tokens");
    if (f.tokenizer) fmt::print(out, "[{}] text   {} -> {}\n", n, quoted(f.texts[n]), quoted(generated[n]));
  }
  auto rate = [](int64_t t, double s) { return s > 0 ? double(t) / s : 0.0; };
  fmt::print(out, "prefill    {} tokens in {:.3f} s: {:.1f} tokens/s\n", r.prefill_tokens, r.prefill_seconds,
             rate(r.prefill_tokens, r.prefill_seconds));
  fmt::print(out, "decode     {} tokens in {:.3f} s: {:.1f} tokens/s\n", r.decode_tokens, r.decode_seconds,
             rate(r.decode_tokens, r.decode_seconds));
  if (comm) print_ep_report(out, *comm, ep_run);
  fmt::print(out, "graphs     decode {}\n", model.decode_graph_status().summary);
  fmt::print(out, "timing     {}\n", opt.warmup ? "after an untimed warm-up of the batch (prefill + one decode step)"
                                            : "cold start included (--no-warmup)");
  fmt::print(out, "cache      {:.2f} MiB\n", double(r.cache_bytes) / (1 << 20));
  // The most this process held on the device (weights uploaded, cache, activations, the CUDA kernels' pool);
  // on the host the mapped checkpoint is not an allocation and does not count.
  const DeviceMemoryStats m = device_memory_stats(dev);
  fmt::print(out, "memory     peak {:.2f} MiB on {} (tensors {:.2f} MiB{})\n", double(m.peak_bytes()) / (1 << 20),
             to_string(dev), double(m.tensor_peak_bytes) / (1 << 20),
             dev.type == DeviceType::cpu ? std::string(", the mapped checkpoint not counted")
                                         : fmt::format(" + CUDA memory pool {:.2f} MiB", double(m.pool_peak_bytes) / (1 << 20)));
  if (opt.json && !quiet) {
    nlohmann::json seqs = nlohmann::json::array();
    for (size_t n = 0; n < prompts.size(); ++n) {
      nlohmann::json s{{"prompt_ids", prompts[n]}, {"ids", r.tokens[n]},
                       {"finish_reason", r.finish[n] == FinishReason::stop ? "stop" : "length"}};
      if (f.tokenizer) s["prompt_text"] = f.texts[n], s["text"] = generated[n];
      seqs.push_back(std::move(s));
    }
    nlohmann::json j{{"model", opt.dir},
                     {"sequences", seqs},
                     {"prefill", {{"tokens", r.prefill_tokens}, {"seconds", r.prefill_seconds}}},
                     {"decode", {{"tokens", r.decode_tokens}, {"seconds", r.decode_seconds}}}};
    if (comm) j["ep"] = ep_json(*comm, ep_run);
    std::printf("%s\n", j.dump().c_str());
  }
  return 0;
}

}  // namespace

int run_generate(const GenerateCmdOptions& opt) {
  const CheckedFlags f = check_flags(opt);
  return run_ep_job("generate", opt.ep, [&](dist::Comm* comm) { return generate_and_report(opt, f, comm); });
}

}  // namespace kimi::cli
