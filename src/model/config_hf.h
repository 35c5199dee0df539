// model/config_hf.h: the keys transformers adds to a Kimi-Linear config.json (docs/model/checkpoint-names.md).
//
// transformers 5's KimiLinearConfig (configuration_kimi_linear.py) reads the checkpoint's keys and writes them back
// with save_pretrained, plus derived copies of some: `linear_num_heads`, `linear_head_dim`,
// `linear_conv_kernel_dim` (of linear_attn_config's num_heads, head_dim, short_conv_kernel_size), `layer_types`
// (per 0-based layer "linear_attention" / "full_attention", of kda_layers / full_attn_layers), `mlp_layer_types`
// (per layer "dense" / "sparse", of first_k_dense_replace), `qk_head_dim` (qk_nope + qk_rope), `head_dim` (it sets
// it to qk_rope_head_dim), `model_max_length` and `dtype` / `torch_dtype`, `architectures`, `auto_map`,
// `transformers_version`, `use_cache` ... Its attribute_map also accepts other names for some settings
// (`num_experts_per_tok`, `n_shared_experts`, `num_local_experts`, `n_group`, `norm_topk_prob`).
//
// kimi.cpp reads the checkpoint's own keys. The copies are checked against them: a copy that contradicts the key it
// was derived from is a kimi::Error naming both keys and both values (a hand-edited or merged config would
// otherwise load with one of the two silently). Keys that configure nothing kimi.cpp computes (`head_dim`,
// `model_max_length`, dtypes, architectures, auto_map) are ignored.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "kimi/model/config.h"

namespace kimi::model {

// The text model's object with transformers' other names resolved: an alias alone is read as its key; an alias
// beside its key must hold the same value (else an error naming both). `source` and `prefix` ("" or
// "text_config.") name the fields in messages.
nlohmann::json resolve_hf_aliases(const nlohmann::json& text_model, const std::string& source,
                                  const std::string& prefix);

// Checks transformers' derived keys in `text_model` against the parsed config c (see the header comment).
void check_hf_duplicates(const nlohmann::json& text_model, const Config& c, const std::string& source,
                         const std::string& prefix);

}  // namespace kimi::model
