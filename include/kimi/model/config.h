// kimi/model/config.h: the model configuration of Kimi K3 and Kimi-Linear (SPEC 1, 13).
//
// Both models are `model_type: kimi_linear`; K3 is Kimi-Linear plus six switches (SPEC 1) and wraps the
// text model's fields in `text_config`: {"model_type": "kimi_k3", "text_config": {"model_type":
// "kimi_linear", ...}}. Both model_type fields are checked (an absent one is taken as its layout implies);
// "kimi_k3" without `text_config` is reported as the missing wrapper. Layer lists in the JSON are 1-based;
// here they are converted once to 0-based `layer_kinds`. parse_config validates every field and its
// consistency and throws kimi::Error naming the field, the expected and the actual value; JSON syntax errors
// give the byte offset, a key repeated in one object is an error, and file bytes are quoted escaped.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kimi::model {

enum class MixerKind : uint8_t { kda, mla };
enum class Activation : uint8_t { silu, situ };

struct Config {
  // trunk
  int64_t vocab_size = 0, hidden_size = 0, num_hidden_layers = 0;
  float rms_norm_eps = 1e-5f;
  bool tie_word_embeddings = false;
  bool k3_wrapper = false;  // the JSON had `text_config` (K3 checkpoint layout, `language_model.` prefix)
  // KDA (linear_attn_config)
  int64_t kda_num_heads = 0, kda_head_dim = 0, conv_kernel = 4;
  bool kda_full_rank_gate = false;            // K3: g_proj; 48B: g_a_proj / g_b_proj
  std::optional<float> gate_lower_bound;      // K3: bounded sigmoid gate; absent: softplus gate
  std::vector<MixerKind> layer_kinds;         // per layer, 0-based
  // MLA
  int64_t num_attention_heads = 0;
  std::optional<int64_t> q_lora_rank;         // absent (null) in Kimi-Linear: q = W_q x
  int64_t kv_lora_rank = 0, qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
  bool mla_use_output_gate = false;
  float mla_norm_eps = 1e-6f;                 // q_a_layernorm / kv_a_layernorm (SPEC 3)
  // FFN
  Activation hidden_act = Activation::silu;
  float situ_beta = 4.f, situ_linear_beta = 0.f;  // lbeta <= 0 (field absent): identity on up
  int64_t intermediate_size = 0, first_k_dense_replace = 0, moe_layer_freq = 1;
  int64_t num_experts = 0, num_experts_per_token = 0, num_shared_experts = 0, moe_intermediate_size = 0;
  std::optional<int64_t> routed_expert_hidden_size;  // latent MoE width (K3)
  bool latent_moe_use_norm = false;
  bool moe_renormalize = true;
  float routed_scaling_factor = 1.f;
  // Block Attention Residuals (K3)
  std::optional<int64_t> attn_res_block_size;

  bool is_moe_layer(int64_t i) const { return num_experts > 0 && i >= first_k_dense_replace && i % moe_layer_freq == 0; }
  bool is_kda_layer(int64_t i) const { return layer_kinds[size_t(i)] == MixerKind::kda; }
};

// Parses config.json text (Kimi-Linear, or K3 with `text_config`). `source` names the file in errors.
Config parse_config(std::string_view json_text, const std::string& source = "config.json");
// Reads and parses the file; "<path>: cannot open: <why>" when it cannot (missing, a directory, ...).
Config load_config(const std::string& path);
// A model directory's config.json: "model directory <dir>: <why>" when dir is not a directory (missing, a file, ...),
// then load_config(dir/config.json).
Config load_model_config(const std::string& dir);
// The same fields as JSON (Kimi-Linear layout, or wrapped in text_config when k3_wrapper).
std::string config_to_json(const Config& c);

// Named configurations: "k3-tiny", "kimi-linear-tiny" (SPEC 13); "k3-slice": K3's real per-layer widths on
// 4 layers with 32 experts and a 32768-token vocabulary (~7 GB, for speed measurements at real sizes).
Config named_config(std::string_view name);
// The names named_config() knows, in that order.
std::span<const std::string_view> named_config_names();

}  // namespace kimi::model
