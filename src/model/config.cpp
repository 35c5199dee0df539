// Implementation of kimi/model/config.h.
#include "kimi/model/config.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "kimi/error.h"
#include "model/config_hf.h"
#include "model/loader_io.h"

namespace kimi::model {

namespace {
using json = nlohmann::json;

// config.json is a few KiB; anything past this limit is not a config (checked before reading it).
constexpr uint64_t kMaxConfigBytes = 16ull << 20;

std::string quote_value(const std::string& s) {
  return json_excerpt(json(s));
}

class Reader {
 public:
  Reader(const json& obj, std::string source, std::string prefix)
      : j_(obj), source_(std::move(source)), prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& expected, const std::string& got) const {
    throw Error(source_ + ": field '" + prefix_ + key + "': expected " + expected + ", got " + got);
  }
  bool has(const std::string& k) const { return j_.contains(k) && !j_[k].is_null(); }

  int64_t integer(const std::string& k, std::optional<int64_t> def, int64_t min) const {
    if (!has(k)) {
      if (!def) fail(k, "an integer", "nothing (missing)");
      return *def;
    }
    const json& v = j_[k];
    if (!v.is_number_integer()) fail(k, "an integer", json_excerpt(v));
    const int64_t x = v.get<int64_t>();
    if (x < min) fail(k, "an integer >= " + std::to_string(min), std::to_string(x));
    return x;
  }
  std::optional<int64_t> opt_integer(const std::string& k, int64_t min) const {
    if (!has(k)) return std::nullopt;
    return integer(k, std::nullopt, min);
  }
  double number(const std::string& k, double def) const {
    if (!has(k)) return def;
    if (!j_[k].is_number()) fail(k, "a number", json_excerpt(j_[k]));
    return j_[k].get<double>();
  }
  std::optional<double> opt_number(const std::string& k) const {
    if (!has(k)) return std::nullopt;
    return number(k, 0);
  }
  bool boolean(const std::string& k, bool def) const {
    if (!has(k)) return def;
    if (!j_[k].is_boolean()) fail(k, "true or false", json_excerpt(j_[k]));
    return j_[k].get<bool>();
  }
  std::string string(const std::string& k, const std::string& def) const {
    if (!has(k)) return def;
    if (!j_[k].is_string()) fail(k, "a string", json_excerpt(j_[k]));
    return j_[k].get<std::string>();
  }
  std::vector<int64_t> int_list(const std::string& k) const {
    if (!has(k)) return {};
    if (!j_[k].is_array()) fail(k, "a list of integers", json_excerpt(j_[k]));
    std::vector<int64_t> v;
    for (const json& e : j_[k]) {
      if (!e.is_number_integer()) fail(k, "a list of integers", json_excerpt(j_[k]));
      v.push_back(e.get<int64_t>());
    }
    return v;
  }

 private:
  const json& j_;
  std::string source_, prefix_;
};
}  // namespace

Config parse_config(std::string_view text, const std::string& source) {
  const json root = parse_json_strict(text, source);
  if (!root.is_object()) throw Error(source + ": expected a JSON object, got " + json_excerpt(root));
  Config c;
  const json* top = &root;
  std::string prefix;
  // K3 wraps the text model: {"model_type": "kimi_k3", "text_config": {"model_type": "kimi_linear", ...}}.
  // Kimi-Linear is the text model itself. An absent model_type is taken as the one its layout implies.
  const Reader outer(root, source, "");
  const bool wrapped = outer.has("text_config");
  const std::string outer_type = outer.string("model_type", wrapped ? "kimi_k3" : "kimi_linear");
  if (wrapped) {
    if (outer_type != "kimi_k3")
      outer.fail("model_type",
                 "\"kimi_k3\" (the K3 wrapper around 'text_config'; Kimi-Linear configs have no text_config)",
                 quote_value(outer_type));
    if (!root["text_config"].is_object())
      outer.fail("text_config", "an object (the K3 text model)", json_excerpt(root["text_config"]));
    top = &root["text_config"];
    prefix = "text_config.";
    c.k3_wrapper = true;
  } else if (outer_type == "kimi_k3") {
    outer.fail("text_config",
               "an object holding the text model (a \"kimi_k3\" config wraps its \"kimi_linear\" text model "
               "in 'text_config')",
               "nothing (missing)");
  } else if (outer_type != "kimi_linear") {
    outer.fail("model_type", "\"kimi_linear\" (Kimi-Linear), or \"kimi_k3\" with a 'text_config' (K3)",
               quote_value(outer_type));
  }
  // transformers' other names for some keys (config_hf.h) resolved in a copy of the text model's object.
  const json text_model = resolve_hf_aliases(*top, source, prefix);
  top = &text_model;
  const Reader r(*top, source, prefix);
  if (c.k3_wrapper) {
    const std::string model_type = r.string("model_type", "kimi_linear");
    if (model_type != "kimi_linear")
      r.fail("model_type", "\"kimi_linear\" (the text model inside a K3 config)", quote_value(model_type));
  }

  c.vocab_size = r.integer("vocab_size", std::nullopt, 1);
  c.hidden_size = r.integer("hidden_size", std::nullopt, 1);
  c.num_hidden_layers = r.integer("num_hidden_layers", std::nullopt, 1);
  c.rms_norm_eps = float(r.number("rms_norm_eps", 1e-5));
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", false);

  if (!top->contains("linear_attn_config") || !(*top)["linear_attn_config"].is_object())
    r.fail("linear_attn_config", "an object",
           top->contains("linear_attn_config") ? json_excerpt((*top)["linear_attn_config"])
                                               : "nothing (missing)");
  const Reader la((*top)["linear_attn_config"], source, prefix + "linear_attn_config.");
  c.kda_num_heads = la.integer("num_heads", std::nullopt, 1);
  c.kda_head_dim = la.integer("head_dim", std::nullopt, 1);
  if (c.kda_head_dim > 256) la.fail("head_dim", "<= 256", std::to_string(c.kda_head_dim));
  c.conv_kernel = la.integer("short_conv_kernel_size", 4, 1);
  if (c.conv_kernel > 8) la.fail("short_conv_kernel_size", "<= 8", std::to_string(c.conv_kernel));
  c.kda_full_rank_gate = la.boolean("use_full_rank_gate", false);
  if (auto lb = la.opt_number("gate_lower_bound")) {
    if (!(*lb < 0)) la.fail("gate_lower_bound", "a negative number", std::to_string(*lb));
    c.gate_lower_bound = float(*lb);
  }
  const auto kda = la.int_list("kda_layers"), full = la.int_list("full_attn_layers");
  c.layer_kinds.assign(size_t(c.num_hidden_layers), MixerKind::kda);
  std::set<int64_t> seen;
  auto mark = [&](const std::vector<int64_t>& list, const char* key, MixerKind kind) {
    for (int64_t l : list) {
      if (l < 1 || l > c.num_hidden_layers)
        la.fail(key, "1-based layer numbers in [1, " + std::to_string(c.num_hidden_layers) + "]", std::to_string(l));
      if (!seen.insert(l).second) la.fail(key, "each layer listed once across kda_layers and full_attn_layers", "layer " + std::to_string(l) + " twice");
      c.layer_kinds[size_t(l - 1)] = kind;
    }
  };
  mark(kda, "kda_layers", MixerKind::kda);
  mark(full, "full_attn_layers", MixerKind::mla);
  if (int64_t(seen.size()) != c.num_hidden_layers)
    la.fail("kda_layers", "kda_layers and full_attn_layers to cover all " + std::to_string(c.num_hidden_layers) + " layers",
            std::to_string(seen.size()) + " layers listed");

  c.num_attention_heads = r.integer("num_attention_heads", std::nullopt, 1);
  if (r.has("num_key_value_heads") && r.integer("num_key_value_heads", std::nullopt, 1) != c.num_attention_heads)
    r.fail("num_key_value_heads", "= num_attention_heads (" + std::to_string(c.num_attention_heads) + ") for MLA",
           std::to_string(r.integer("num_key_value_heads", std::nullopt, 1)));
  c.q_lora_rank = r.opt_integer("q_lora_rank", 1);
  c.kv_lora_rank = r.integer("kv_lora_rank", std::nullopt, 1);
  c.qk_nope_head_dim = r.integer("qk_nope_head_dim", std::nullopt, 1);
  c.qk_rope_head_dim = r.integer("qk_rope_head_dim", std::nullopt, 0);
  c.v_head_dim = r.integer("v_head_dim", std::nullopt, 1);
  if (!r.boolean("mla_use_nope", true)) r.fail("mla_use_nope", "true (Kimi MLA uses no rotary embedding)", "false");
  c.mla_use_output_gate = r.boolean("mla_use_output_gate", false);

  const std::string act = r.string("hidden_act", "silu");
  if (act == "silu") {
    c.hidden_act = Activation::silu;
  } else if (act == "situ") {
    c.hidden_act = Activation::situ;
  } else {
    r.fail("hidden_act", "\"silu\" or \"situ\"", quote_value(act));
  }
  c.situ_beta = float(r.number("activation_situ_beta", 4.0));
  c.situ_linear_beta = float(r.number("activation_situ_linear_beta", 0.0));  // absent: identity on up (SPEC 7)
  if (c.hidden_act == Activation::situ && !(c.situ_beta > 0))
    r.fail("activation_situ_beta", "a positive number", std::to_string(c.situ_beta));

  c.intermediate_size = r.integer("intermediate_size", std::nullopt, 1);
  c.num_experts = r.integer("num_experts", 0, 0);
  c.first_k_dense_replace = r.integer("first_k_dense_replace", 0, 0);
  c.moe_layer_freq = r.integer("moe_layer_freq", 1, 1);
  if (c.num_experts > 0) {
    c.num_experts_per_token = r.integer("num_experts_per_token", std::nullopt, 1);
    if (c.num_experts_per_token > c.num_experts)
      r.fail("num_experts_per_token", "<= num_experts (" + std::to_string(c.num_experts) + ")", std::to_string(c.num_experts_per_token));
    c.num_shared_experts = r.integer("num_shared_experts", 0, 0);
    c.moe_intermediate_size = r.integer("moe_intermediate_size", std::nullopt, 1);
    c.routed_expert_hidden_size = r.opt_integer("routed_expert_hidden_size", 1);
    c.latent_moe_use_norm = r.boolean("latent_moe_use_norm", false);
    if (c.latent_moe_use_norm && !c.routed_expert_hidden_size)
      r.fail("latent_moe_use_norm", "false without routed_expert_hidden_size", "true");
    c.moe_renormalize = r.boolean("moe_renormalize", true);
    c.routed_scaling_factor = float(r.number("routed_scaling_factor", 1.0));
    const std::string f = r.string("moe_router_activation_func", "sigmoid");
    if (f != "sigmoid") r.fail("moe_router_activation_func", "\"sigmoid\"", quote_value(f));
    for (const char* k : {"num_expert_group", "topk_group"})
      if (r.integer(k, 1, 1) != 1) r.fail(k, "1 (grouped routing is not used by Kimi models)", std::to_string(r.integer(k, 1, 1)));
  }
  c.attn_res_block_size = r.opt_integer("attn_res_block_size", 1);
  check_hf_duplicates(*top, c, source, prefix);
  return c;
}

Config load_config(const std::string& path) {
  return parse_config(read_text_file(path, "", kMaxConfigBytes), path);
}

Config load_model_config(const std::string& dir) {
  require_directory(dir, "model directory ",
                    "a model directory holding config.json and model.safetensors, or model.safetensors.index.json "
                    "and its shards");
  return load_config((std::filesystem::path(dir) / "config.json").string());
}

std::string config_to_json(const Config& c) {
  json la = {{"num_heads", c.kda_num_heads}, {"head_dim", c.kda_head_dim}, {"short_conv_kernel_size", c.conv_kernel},
             {"use_full_rank_gate", c.kda_full_rank_gate}};
  if (c.gate_lower_bound) la["gate_lower_bound"] = *c.gate_lower_bound;
  std::vector<int64_t> kda, full;
  for (size_t i = 0; i < c.layer_kinds.size(); ++i) (c.layer_kinds[i] == MixerKind::kda ? kda : full).push_back(int64_t(i) + 1);
  la["kda_layers"] = kda;
  la["full_attn_layers"] = full;
  json t = {{"model_type", "kimi_linear"},
            {"vocab_size", c.vocab_size},
            {"hidden_size", c.hidden_size},
            {"num_hidden_layers", c.num_hidden_layers},
            {"rms_norm_eps", c.rms_norm_eps},
            {"tie_word_embeddings", c.tie_word_embeddings},
            {"linear_attn_config", la},
            {"num_attention_heads", c.num_attention_heads},
            {"num_key_value_heads", c.num_attention_heads},
            {"q_lora_rank", c.q_lora_rank ? json(*c.q_lora_rank) : json(nullptr)},
            {"kv_lora_rank", c.kv_lora_rank},
            {"qk_nope_head_dim", c.qk_nope_head_dim},
            {"qk_rope_head_dim", c.qk_rope_head_dim},
            {"v_head_dim", c.v_head_dim},
            {"mla_use_nope", true},
            {"mla_use_output_gate", c.mla_use_output_gate},
            {"hidden_act", c.hidden_act == Activation::situ ? "situ" : "silu"},
            {"intermediate_size", c.intermediate_size},
            {"first_k_dense_replace", c.first_k_dense_replace},
            {"moe_layer_freq", c.moe_layer_freq},
            {"num_experts", c.num_experts},
            {"num_experts_per_token", c.num_experts_per_token},
            {"num_shared_experts", c.num_shared_experts},
            {"moe_intermediate_size", c.moe_intermediate_size},
            {"moe_renormalize", c.moe_renormalize},
            {"moe_router_activation_func", "sigmoid"},
            {"routed_scaling_factor", c.routed_scaling_factor},
            {"num_expert_group", 1},
            {"topk_group", 1},
            // NOTE: transformers defaults absent token ids to Kimi's real ones (163839 ...), which break an
            // embedding of a tiny vocabulary (padding_idx out of range): say "none" explicitly.
            {"pad_token_id", nullptr},
            {"bos_token_id", nullptr},
            {"eos_token_id", nullptr}};
  if (c.hidden_act == Activation::situ) {
    t["activation_situ_beta"] = c.situ_beta;
    if (c.situ_linear_beta > 0) t["activation_situ_linear_beta"] = c.situ_linear_beta;
  }
  if (c.routed_expert_hidden_size) {
    t["routed_expert_hidden_size"] = *c.routed_expert_hidden_size;
    t["latent_moe_use_norm"] = c.latent_moe_use_norm;
  }
  if (c.attn_res_block_size) t["attn_res_block_size"] = *c.attn_res_block_size;
  if (c.k3_wrapper) return json{{"model_type", "kimi_k3"}, {"text_config", t}}.dump(2);
  return t.dump(2);
}

namespace {
constexpr std::string_view kNamedConfigs[] = {"k3-tiny", "kimi-linear-tiny", "k3-slice"};
}  // namespace

Config named_config(std::string_view name) {
  // SPEC 13.
  static const char* k3_tiny = R"({"model_type":"kimi_linear","vocab_size":512,"hidden_size":256,"num_hidden_layers":9,
 "rms_norm_eps":1e-5,"tie_word_embeddings":false,
 "linear_attn_config":{"num_heads":4,"head_dim":64,"short_conv_kernel_size":4,"use_full_rank_gate":true,
   "gate_lower_bound":-5.0,"kda_layers":[1,2,3,5,6,7],"full_attn_layers":[4,8,9]},
 "num_attention_heads":4,"num_key_value_heads":4,"q_lora_rank":96,"kv_lora_rank":64,
 "qk_nope_head_dim":32,"qk_rope_head_dim":16,"v_head_dim":32,"mla_use_nope":true,"mla_use_output_gate":true,
 "hidden_act":"situ","activation_situ_beta":4.0,"activation_situ_linear_beta":25.0,
 "intermediate_size":512,"first_k_dense_replace":1,"moe_layer_freq":1,
 "num_experts":16,"num_experts_per_token":4,"num_shared_experts":2,"moe_intermediate_size":64,
 "routed_expert_hidden_size":128,"latent_moe_use_norm":true,"moe_router_activation_func":"sigmoid",
 "moe_renormalize":true,"routed_scaling_factor":1.0,"num_expert_group":1,"topk_group":1,"attn_res_block_size":4})";
  static const char* kl_tiny = R"({"model_type":"kimi_linear","vocab_size":512,"hidden_size":256,"num_hidden_layers":9,
 "rms_norm_eps":1e-5,"tie_word_embeddings":false,
 "linear_attn_config":{"num_heads":4,"head_dim":64,"short_conv_kernel_size":4,"use_full_rank_gate":false,
   "kda_layers":[1,2,3,5,6,7],"full_attn_layers":[4,8,9]},
 "num_attention_heads":4,"num_key_value_heads":4,"q_lora_rank":null,"kv_lora_rank":64,
 "qk_nope_head_dim":32,"qk_rope_head_dim":16,"v_head_dim":32,"mla_use_nope":true,"mla_use_output_gate":false,
 "hidden_act":"silu","intermediate_size":512,"first_k_dense_replace":1,"moe_layer_freq":1,
 "num_experts":16,"num_experts_per_token":4,"num_shared_experts":2,"moe_intermediate_size":64,
 "moe_router_activation_func":"sigmoid","moe_renormalize":true,"routed_scaling_factor":2.446,
 "num_expert_group":1,"topk_group":1})";
  // K3's real per-layer widths (SPEC 1) on 4 layers (3 KDA + 1 MLA, layer 0 dense), 32 experts top-8 instead of
  // 896 top-16, a 32768-token vocabulary instead of 163840: ~7 GB, a real-size slice that fits one machine.
  static const char* k3_slice = R"({"model_type":"kimi_linear","vocab_size":32768,"hidden_size":7168,"num_hidden_layers":4,
 "rms_norm_eps":1e-5,"tie_word_embeddings":false,
 "linear_attn_config":{"num_heads":96,"head_dim":128,"short_conv_kernel_size":4,"use_full_rank_gate":true,
   "gate_lower_bound":-5.0,"kda_layers":[1,2,3],"full_attn_layers":[4]},
 "num_attention_heads":96,"num_key_value_heads":96,"q_lora_rank":1536,"kv_lora_rank":512,
 "qk_nope_head_dim":128,"qk_rope_head_dim":64,"v_head_dim":128,"mla_use_nope":true,"mla_use_output_gate":true,
 "hidden_act":"situ","activation_situ_beta":4.0,"activation_situ_linear_beta":25.0,
 "intermediate_size":33792,"first_k_dense_replace":1,"moe_layer_freq":1,
 "num_experts":32,"num_experts_per_token":8,"num_shared_experts":2,"moe_intermediate_size":3072,
 "routed_expert_hidden_size":3584,"latent_moe_use_norm":true,"moe_router_activation_func":"sigmoid",
 "moe_renormalize":true,"routed_scaling_factor":1.0,"num_expert_group":1,"topk_group":1,"attn_res_block_size":12})";
  struct Named {
    std::string_view name;
    const char* json;
    bool k3_wrapper;  // written in K3's layout (text_config, language_model. prefix)
  };
  static const Named kNamed[] = {{kNamedConfigs[0], k3_tiny, true}, {kNamedConfigs[1], kl_tiny, false},
                                 {kNamedConfigs[2], k3_slice, true}};
  for (const Named& n : kNamed) {
    if (n.name != name) continue;
    Config c = parse_config(n.json, std::string(n.name));
    c.k3_wrapper = n.k3_wrapper;
    return c;
  }
  throw Error("named_config: unknown configuration '" + std::string(name) + "' (expected k3-tiny, kimi-linear-tiny or k3-slice)");
}

std::span<const std::string_view> named_config_names() { return kNamedConfigs; }

}  // namespace kimi::model
