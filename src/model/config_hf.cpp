// model/config_hf.cpp: transformers' extra config.json keys (config_hf.h).
#include "model/config_hf.h"

#include "kimi/error.h"
#include "model/loader_io.h"

namespace kimi::model {

namespace {
using json = nlohmann::json;

bool present(const json& obj, const char* key) { return obj.contains(key) && !obj[key].is_null(); }

class Checker {
 public:
  Checker(const json& obj, const std::string& source, const std::string& prefix)
      : obj_(obj), source_(source), prefix_(prefix) {}

  [[noreturn]] void contradict(const std::string& a, const std::string& va, const std::string& b,
                               const std::string& vb, const std::string& why) const {
    throw Error(source_ + ": fields '" + prefix_ + a + "' and '" + prefix_ + b + "' contradict: expected the same " +
                "setting (" + why + "), got " + va + " and " + vb);
  }
  [[noreturn]] void fail(const std::string& key, const std::string& expected, const std::string& got) const {
    throw Error(source_ + ": field '" + prefix_ + key + "': expected " + expected + ", got " + got);
  }

  // A derived integer key `copy` against the value the config was parsed with (`key`, shown as `shown`).
  void same_integer(const char* copy, const std::string& key, int64_t value, const std::string& shown) const {
    if (!present(obj_, copy)) return;
    const json& v = obj_[copy];
    if (!v.is_number_integer()) fail(copy, "an integer", json_excerpt(v));
    if (v.get<int64_t>() != value)
      contradict(copy, std::to_string(v.get<int64_t>()), key, shown,
                 "transformers writes '" + std::string(copy) + "' as a copy of '" + key + "'");
  }

  // A per-layer list of strings: `key` must hold num_layers of them, each `a` or `b`.
  const json* layer_list(const char* key, int64_t num_layers, const char* a, const char* b) const {
    if (!present(obj_, key)) return nullptr;
    const json& v = obj_[key];
    const std::string expected = "a list of " + std::to_string(num_layers) + " (num_hidden_layers) \"" + a +
                                 "\" / \"" + b + "\"";
    if (!v.is_array()) fail(key, expected, json_excerpt(v));
    if (int64_t(v.size()) != num_layers)
      fail(key, expected, std::to_string(v.size()) + (v.size() == 1 ? " entry" : " entries"));
    for (size_t i = 0; i < v.size(); ++i) {
      const std::string* s = v[i].is_string() ? &v[i].get_ref<const std::string&>() : nullptr;
      if (!s || (*s != a && *s != b)) fail(key, expected, json_excerpt(v[i]) + " at index " + std::to_string(i));
    }
    return &v;
  }

 private:
  const json& obj_;
  const std::string &source_, &prefix_;
};

std::string quoted(const char* s) { return std::string("\"") + s + "\""; }

}  // namespace

json resolve_hf_aliases(const json& text_model, const std::string& source, const std::string& prefix) {
  // {the key kimi.cpp reads, the other name transformers' attribute_map accepts for it}
  static const std::pair<const char*, const char*> kAliases[] = {
      {"num_experts_per_token", "num_experts_per_tok"}, {"num_shared_experts", "n_shared_experts"},
      {"num_experts", "num_local_experts"},             {"num_expert_group", "n_group"},
      {"moe_renormalize", "norm_topk_prob"},
  };
  json out = text_model;
  if (!out.is_object()) return out;
  const Checker check(out, source, prefix);
  for (const auto& [key, alias] : kAliases) {
    if (!present(out, alias)) continue;
    if (!present(out, key)) {
      out[key] = out[alias];
    } else if (out[key] != out[alias]) {
      check.contradict(key, json_excerpt(out[key]), alias, json_excerpt(out[alias]),
                       "transformers reads '" + std::string(alias) + "' as '" + key + "'");
    }
  }
  return out;
}

void check_hf_duplicates(const json& text_model, const Config& c, const std::string& source,
                         const std::string& prefix) {
  const Checker check(text_model, source, prefix);
  const json& la = text_model["linear_attn_config"];
  check.same_integer("linear_num_heads", "linear_attn_config.num_heads", c.kda_num_heads,
                     std::to_string(c.kda_num_heads));
  check.same_integer("linear_head_dim", "linear_attn_config.head_dim", c.kda_head_dim, std::to_string(c.kda_head_dim));
  check.same_integer("linear_conv_kernel_dim", "linear_attn_config.short_conv_kernel_size", c.conv_kernel,
                     std::to_string(c.conv_kernel) + (present(la, "short_conv_kernel_size") ? "" : " (absent: 4)"));
  check.same_integer("qk_head_dim", "qk_nope_head_dim' + 'qk_rope_head_dim", c.qk_nope_head_dim + c.qk_rope_head_dim,
                     std::to_string(c.qk_nope_head_dim) + " + " + std::to_string(c.qk_rope_head_dim));

  if (const json* types = check.layer_list("layer_types", c.num_hidden_layers, "linear_attention", "full_attention")) {
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      const bool kda = c.is_kda_layer(i);
      const char* want = kda ? "linear_attention" : "full_attention";
      if ((*types)[size_t(i)].get_ref<const std::string&>() != want)
        check.contradict("layer_types", "layer_types[" + std::to_string(i) + "] = " + json_excerpt((*types)[size_t(i)]),
                         std::string("linear_attn_config.") + (kda ? "kda_layers" : "full_attn_layers"),
                         "layer " + std::to_string(i + 1) + " listed there",
                         "layer_types[i] is 1-based layer i + 1: " + quoted(want) + " for a layer in " +
                             (kda ? "kda_layers" : "full_attn_layers"));
    }
  }
  if (const json* types = check.layer_list("mlp_layer_types", c.num_hidden_layers, "dense", "sparse")) {
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      const bool moe = c.is_moe_layer(i);
      const char* want = moe ? "sparse" : "dense";
      if ((*types)[size_t(i)].get_ref<const std::string&>() != want)
        check.contradict("mlp_layer_types",
                         "mlp_layer_types[" + std::to_string(i) + "] = " + json_excerpt((*types)[size_t(i)]),
                         "first_k_dense_replace' / 'moe_layer_freq",
                         "first_k_dense_replace " + std::to_string(c.first_k_dense_replace) + ", moe_layer_freq " +
                             std::to_string(c.moe_layer_freq) + ", num_experts " + std::to_string(c.num_experts),
                         "they make layer " + std::to_string(i) + " (0-based) " + (moe ? "MoE" : "dense") +
                             ", so mlp_layer_types[" + std::to_string(i) + "] = " + quoted(want));
    }
  }
}

}  // namespace kimi::model
