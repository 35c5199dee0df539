#include "kimi/model_cmds.h"

#include <fmt/core.h>

#include <filesystem>
#include <map>

#include "kimi/device.h"
#include "kimi/error.h"
#include "kimi/model/checkpoint.h"
#include "kimi/model/placement.h"

namespace kimi::cli {

int run_random_model(const RandomModelOptions& opt) {
  using namespace kimi::model;
  const Config c = std::filesystem::exists(opt.config) ? load_config(opt.config) : named_config(opt.config);
  SchemaOptions so;
  if (opt.experts == "mxfp4") {
    so.mxfp4_experts = true;
  } else if (opt.experts == "auto") {
    so.mxfp4_experts = c.k3_wrapper;
  } else if (opt.experts != "bf16") {
    throw Error("random-model: --experts: expected auto, mxfp4 or bf16, got '" + opt.experts + "'");
  }
  if (so.mxfp4_experts && c.routed_expert_hidden_size.value_or(c.hidden_size) % 32 != 0)
    throw Error("random-model: MXFP4 experts need the expert input width divisible by 32");
  write_random_model(opt.out, c, so, opt.seed, opt.shards);
  fmt::print("wrote {} ({} config, {} experts, seed {}, {} shard(s))\n", opt.out, opt.config,
             so.mxfp4_experts ? "MXFP4" : "bf16", opt.seed, opt.shards);
  return 0;
}

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
