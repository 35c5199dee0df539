// `kimi generate`: loads a checkpoint, generates for a batch of prompts, prints the tokens and the speed.
#include <fmt/core.h>

#include <string>
#include <vector>

#include "kimi/device.h"
#include "kimi/error.h"
#include "kimi/model/generate.h"
#include "kimi/model_cmds.h"

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

}  // namespace

int run_generate(const GenerateCmdOptions& opt) {
  using namespace kimi::model;
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < opt.prompts.size(); ++i) prompts.push_back(parse_ids(opt.prompts[i], i));
  const Device dev = parse_device(opt.device, "generate: --device");
  const Model model(opt.dir, dev);  // notes which blocks fall back to the CPU (stderr, kimi/log.h)
  const Config& c = model.config();
  fmt::print("model      {} ({} layers, hidden {}, vocab {})\n", opt.dir, c.num_hidden_layers, c.hidden_size,
             c.vocab_size);
  fmt::print("placement  {}\n", model.placement().summary());
  if (dev.type != DeviceType::cpu)
    fmt::print("device     {:.2f} MiB of weights uploaded to the GPU\n", double(model.device_weight_bytes()) / (1 << 20));
  GenerateOptions g;
  g.max_new_tokens = opt.max_tokens;
  g.stop_tokens = opt.stop;
  g.sampling = {opt.temperature, opt.top_k, opt.top_p, opt.seed};
  Context ctx;
  ctx.cpu_threads = opt.threads;
  if (opt.warmup) generate(model, prompts, g, ctx);
  const GenerateResult r = generate(model, prompts, g, ctx);
  for (size_t n = 0; n < prompts.size(); ++n)
    fmt::print("[{}] prompt {} -> {} ({})\n", n, join(prompts[n]), join(r.tokens[n]),
               r.finish[n] == FinishReason::stop ? "stop token" : "max tokens");
  auto rate = [](int64_t t, double s) { return s > 0 ? double(t) / s : 0.0; };
  fmt::print("prefill    {} tokens in {:.3f} s: {:.1f} tokens/s\n", r.prefill_tokens, r.prefill_seconds,
             rate(r.prefill_tokens, r.prefill_seconds));
  fmt::print("decode     {} tokens in {:.3f} s: {:.1f} tokens/s\n", r.decode_tokens, r.decode_seconds,
             rate(r.decode_tokens, r.decode_seconds));
  fmt::print("cache      {:.2f} MiB\n", double(r.cache_bytes) / (1 << 20));
  return 0;
}

}  // namespace kimi::cli
