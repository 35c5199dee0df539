#include "kimi/model_cmds.h"

#include <fmt/core.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

#include "kimi/device.h"
#include "kimi/error.h"
#include "kimi/model/checkpoint.h"
#include "kimi/model/placement.h"
#include "text/random_tokenizer.h"

namespace kimi::cli {

namespace {

// Why `out` cannot take a new checkpoint, or "" when it can. Creates nothing. An existing directory that already
// holds a checkpoint (config.json, safetensors of the HF layout, or tokenizer files) is refused unless `force`:
// random-model replaces those files, and --out pointing at a real checkpoint must not lose it by a slip.
std::string out_dir_problem(const std::string& out, bool force) {
  namespace fs = std::filesystem;
  if (out.empty()) return "expected a directory path, got an empty one";
  std::error_code ec;
  const fs::path p(out);
  const fs::file_status st = fs::status(p, ec);
  if (fs::exists(st)) {
    if (!fs::is_directory(st)) return "exists and is not a directory";
    if (::access(out.c_str(), W_OK | X_OK) != 0) return "cannot write into it: " + std::string(std::strerror(errno));
    if (force) return "";
    for (const fs::directory_entry& e : fs::directory_iterator(p, ec)) {
      const std::string n = e.path().filename().string();
      const bool shard = n.rfind("model-", 0) == 0 && n.size() > 12 && n.compare(n.size() - 12, 12, ".safetensors") == 0;
      if (n == "config.json" || n == "model.safetensors" || n == "model.safetensors.index.json" || shard ||
          n == "tiktoken.model" || n == "tokenizer_config.json")
        return "already holds a checkpoint (" + n + "); pass --force to replace it";
    }
    return "";
  }
  // Missing: it is created with its missing parents, in the nearest existing ancestor.
  fs::path a = fs::absolute(p, ec).parent_path();
  while (!a.empty() && !fs::exists(fs::status(a, ec)) && a != a.root_path()) a = a.parent_path();
  if (a.empty()) a = fs::current_path(ec);
  if (!fs::is_directory(fs::status(a, ec))) return "cannot be created: '" + a.string() + "' is not a directory";
  if (::access(a.c_str(), W_OK | X_OK) != 0)
    return "cannot be created in '" + a.string() + "': " + std::string(std::strerror(errno));
  return "";
}

bool is_named_config(const std::string& name) {
  const auto names = kimi::model::named_config_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

int run_random_model(const RandomModelOptions& opt) {
  using namespace kimi::model;
  // Every flag is checked before anything is written.
  if (!is_named_config(opt.config) && !std::filesystem::exists(opt.config))
    throw Error("random-model: config: expected k3-tiny, kimi-linear-tiny, k3-slice or a config.json path, got '" +
                opt.config + "' (no such file)");
  const Config c = is_named_config(opt.config) ? named_config(opt.config) : load_config(opt.config);
  const uint64_t seed = parse_seed(opt.seed, "random-model: --seed");
  SchemaOptions so;
  if (opt.experts == "mxfp4") {
    so.mxfp4_experts = true;
  } else if (opt.experts == "auto") {
    so.mxfp4_experts = c.k3_wrapper;
  } else if (opt.experts != "bf16") {
    throw Error("random-model: --experts: expected auto, mxfp4 or bf16, got '" + opt.experts + "'");
  }
  if (so.mxfp4_experts && c.routed_expert_hidden_size.value_or(c.hidden_size) % 32 != 0)
    throw Error("random-model: --experts: MXFP4 experts need the expert input width divisible by 32, got " +
                std::to_string(c.routed_expert_hidden_size.value_or(c.hidden_size)));
  const int64_t tensors = int64_t(checkpoint_schema(c, so).size());
  if (opt.shards < 1 || opt.shards > tensors)
    throw Error("random-model: --shards: expected a value in [1, " + std::to_string(tensors) + "] (" + opt.config + " has " +
                std::to_string(tensors) + " tensors; every shard holds at least one), got " + std::to_string(opt.shards));
  if (const std::string why = out_dir_problem(opt.out, opt.force); !why.empty())
    throw Error("random-model: --out '" + opt.out + "': " + why);
  write_random_model(opt.out, c, so, seed, opt.shards);
  fmt::print("wrote {} ({} config, {} experts, seed {}, {} shard(s))\n", opt.out, opt.config,
             so.mxfp4_experts ? "MXFP4" : "bf16", seed, opt.shards);
  // The tokenizer (text/random_tokenizer.h): the family's specials follow the config's layout.
  const auto family = c.k3_wrapper ? kimi::text::SpecialFamily::k3 : kimi::text::SpecialFamily::kimi_linear;
  if (c.vocab_size >= kimi::text::kMinTokenizerVocab) {
    kimi::text::write_random_tokenizer(opt.out, c.vocab_size, family);
    fmt::print("tokenizer  tiktoken.model ({} base tokens) + tokenizer_config.json ({} specials)\n",
               c.vocab_size - 256, c.k3_wrapper ? "K3" : "Kimi-Linear");
  } else {
    // A tokenizer of another vocabulary left from an earlier --force run would not match this model.
    std::error_code ec;
    for (const char* f : {"tiktoken.model", "tokenizer_config.json"})
      std::filesystem::remove(std::filesystem::path(opt.out) / f, ec);
    fmt::print("tokenizer  none: vocab_size {} leaves no room for the 256 byte tokens and 256 special tokens "
               "(needs >= {})\n", c.vocab_size, kimi::text::kMinTokenizerVocab);
  }
  return 0;
}

uint64_t parse_seed(const std::string& s, const std::string& option) {
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size())
    throw Error(option + ": expected an integer in [0, 2^64 - 1 = " + std::to_string(UINT64_MAX) + "], got '" + s + "'");
  return v;
}

int max_cpu_threads() { return int(std::max(1u, std::thread::hardware_concurrency())); }

Device parse_device(const std::string& s, const std::string& option) {
  if (s == "cpu") return Device::cpu();
  if (s == "cuda") return Device::cuda(0);
  const std::string idx = s.size() > 5 && s.compare(0, 5, "cuda:") == 0 ? s.substr(5) : "";
  if (!idx.empty() && idx.size() <= 4 && idx.find_first_not_of("0123456789") == std::string::npos)
    return Device::cuda(std::stoi(idx));
  throw Error(option + ": expected cpu, cuda or cuda:<index>, got '" + s + "'");
}

int run_inspect(const std::string& dir, const std::string& device) {
  using namespace kimi::model;
  const Device dev = parse_device(device, "inspect: --device");
  const ModelFiles m = open_model(dir);
  const Config& c = m.config;
  std::string kinds;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) kinds += c.is_kda_layer(i) ? (c.is_moe_layer(i) ? 'K' : 'k') : (c.is_moe_layer(i) ? 'M' : 'm');
  fmt::print("model      {} ({})\n", dir, c.k3_wrapper ? "Kimi K3 layout" : "Kimi-Linear layout");
  fmt::print("layers     {}  [{}]  (k/K: KDA, m/M: MLA; upper case: MoE FFN)\n", c.num_hidden_layers, kinds);
  fmt::print("hidden     {}  vocab {}  rms eps {}\n", c.hidden_size, c.vocab_size, c.rms_norm_eps);
  fmt::print("KDA        {} heads x {}  conv {}  gate {}  output gate {}\n", c.kda_num_heads, c.kda_head_dim,
             c.conv_kernel, c.gate_lower_bound ? fmt::format("bounded (lb {})", *c.gate_lower_bound) : "softplus",
             c.kda_full_rank_gate ? "full rank" : "low rank");
  fmt::print("MLA        {} heads  q_lora {}  kv_lora {}  nope {} rope {} v {}  output gate {}\n", c.num_attention_heads,
             c.q_lora_rank ? std::to_string(*c.q_lora_rank) : "none", c.kv_lora_rank, c.qk_nope_head_dim,
             c.qk_rope_head_dim, c.v_head_dim, c.mla_use_output_gate ? "yes" : "no");
  fmt::print("FFN        {}  dense {}  experts {} top-{}  shared {}  expert {}  latent {}  scaling {}\n",
             c.hidden_act == Activation::situ ? "SiTU-GLU" : "SiLU-GLU", c.intermediate_size, c.num_experts,
             c.num_experts_per_token, c.num_shared_experts, c.moe_intermediate_size,
             c.routed_expert_hidden_size ? std::to_string(*c.routed_expert_hidden_size) : "none", c.routed_scaling_factor);
  fmt::print("AttnRes    {}\n", c.attn_res_block_size ? fmt::format("block {}", *c.attn_res_block_size) : "off (pre-norm)");

  std::map<std::string, uint64_t> bytes_by_dtype;
  uint64_t params = 0, routed = 0, embed = 0;
  for (const TensorSpec& s : m.schema) {
    const TensorInfo& t = m.checkpoint.info(s.name);
    bytes_by_dtype[std::string(dtype_name(t.dtype))] += t.nbytes;
    uint64_t n = 1;
    for (int64_t d : t.shape) n *= uint64_t(d);
    if (s.role == TensorRole::mxfp4_packed) n *= 2;  // two weights per byte
    if (s.role == TensorRole::mxfp4_scale) continue;
    params += n;
    if (s.routed_expert) routed += n;
    if (s.name.find("embed_tokens") != std::string::npos) embed += n;
  }
  const double active_frac = c.num_experts ? double(c.num_experts_per_token) / double(c.num_experts) : 0.0;
  const uint64_t active = params - routed + uint64_t(double(routed) * active_frac);
  fmt::print("tensors    {} ({} unused by the config)\n", m.schema.size(), m.unused.size());
  for (const auto& [dt, b] : bytes_by_dtype) fmt::print("bytes      {:>5} {:>14}\n", dt, b);
  fmt::print("parameters {} total, {} routed-expert, {} active per token ({} without the embedding)\n", params, routed,
             active, active - embed);
  for (const std::string& u : m.unused) fmt::print("unused     {}\n", u);
  // Where each block would run on `dev` (kimi/model/placement.h): the rule needs no GPU to be evaluated.
  const Placement p = plan_placement(c, dev, op_supported);
  fmt::print("placement  {}{}\n", p.summary(),
             dev.type != DeviceType::cpu && !cuda_built() ? "  (this build has no CUDA backend)" : "");
  for (const std::string& n : p.notes) fmt::print("note       {}\n", n);
  return 0;
}

}  // namespace kimi::cli
