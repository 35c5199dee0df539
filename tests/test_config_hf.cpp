// tests/test_config_hf.cpp: config.json as transformers writes it (model/config_hf.h): its extra keys load, its other
// names for settings are read, and a derived key that contradicts its source is an error naming both keys and values.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "expect_error.h"
#include "kimi/model/config.h"

namespace kimi::model {
namespace {

using json = nlohmann::json;
using testutil::error_message_of;

const std::string kHfConfig = std::string(KIMI_FIXTURES_DIR) + "/transformers-5.24.0-kimi-linear-tiny-config.json";

json hf_config() {
  std::ifstream in(kHfConfig);
  return json::parse(in);
}

std::string message_for(const json& j) {
  return error_message_of([&] { parse_config(j.dump(), "config.json"); });
}

TEST(ConfigHf, TransformersSavedConfigLoadsAsTheOriginal) {
  const json j = hf_config();
  ASSERT_TRUE(j.contains("layer_types") && j.contains("mlp_layer_types") && j.contains("linear_num_heads") &&
              j.contains("architectures") && j.contains("dtype") && j.contains("qk_head_dim"));
  const Config hf = load_config(kHfConfig);
  const Config tiny = named_config("kimi-linear-tiny");
  // The same model: config_to_json writes every field kimi.cpp reads.
  EXPECT_EQ(config_to_json(hf), config_to_json(tiny));
}

TEST(ConfigHf, ExtraKeysKimiDoesNotReadAreIgnored) {
  json j = hf_config();
  j["torch_dtype"] = "bfloat16";
  j["auto_map"] = {{"AutoConfig", "configuration_kimi.KimiLinearConfig"}};
  j["head_dim"] = 72;  // transformers sets it to qk_rope_head_dim; nothing in kimi.cpp reads it
  j["model_max_length"] = 4096;
  EXPECT_EQ(config_to_json(parse_config(j.dump())), config_to_json(named_config("kimi-linear-tiny")));
}

TEST(ConfigHf, ContradictingCopiesNameBothKeysAndValues) {
  json j = hf_config();
  j["linear_num_heads"] = 5;
  EXPECT_EQ(message_for(j),
            "config.json: fields 'linear_num_heads' and 'linear_attn_config.num_heads' contradict: expected the same "
            "setting (transformers writes 'linear_num_heads' as a copy of 'linear_attn_config.num_heads'), got 5 and "
            "4");
  j = hf_config();
  j["linear_head_dim"] = 128;
  EXPECT_KIMI_ERROR(parse_config(j.dump()), "fields 'linear_head_dim' and 'linear_attn_config.head_dim' contradict",
                    "got 128 and 64");
  j = hf_config();
  j["linear_conv_kernel_dim"] = 3;
  j["linear_attn_config"].erase("short_conv_kernel_size");
  EXPECT_KIMI_ERROR(parse_config(j.dump()),
                    "fields 'linear_conv_kernel_dim' and 'linear_attn_config.short_conv_kernel_size' contradict",
                    "got 3 and 4 (absent: 4)");
  j = hf_config();
  j["qk_head_dim"] = 47;
  EXPECT_KIMI_ERROR(parse_config(j.dump()), "fields 'qk_head_dim' and 'qk_nope_head_dim' + 'qk_rope_head_dim'",
                    "got 47 and 32 + 16");
  j = hf_config();
  j["linear_num_heads"] = "4";
  EXPECT_EQ(message_for(j), "config.json: field 'linear_num_heads': expected an integer, got \"4\"");
}

TEST(ConfigHf, LayerTypesAgainstTheLayerLists) {
  json j = hf_config();
  j["layer_types"][3] = "linear_attention";  // layer 4 is in full_attn_layers
  EXPECT_EQ(message_for(j),
            "config.json: fields 'layer_types' and 'linear_attn_config.full_attn_layers' contradict: expected the same "
            "setting (layer_types[i] is 1-based layer i + 1: \"full_attention\" for a layer in full_attn_layers), got "
            "layer_types[3] = \"linear_attention\" and layer 4 listed there");
  j = hf_config();
  j["layer_types"][0] = "full_attention";
  EXPECT_KIMI_ERROR(parse_config(j.dump()), "'linear_attn_config.kda_layers' contradict",
                    "got layer_types[0] = \"full_attention\" and layer 1 listed there");
  j = hf_config();
  j["layer_types"].erase(8);
  EXPECT_EQ(message_for(j),
            "config.json: field 'layer_types': expected a list of 9 (num_hidden_layers) \"linear_attention\" / "
            "\"full_attention\", got 8 entries");
  j = hf_config();
  j["layer_types"][2] = "sliding_attention";
  EXPECT_KIMI_ERROR(parse_config(j.dump()), "field 'layer_types'", "got \"sliding_attention\" at index 2");
}

TEST(ConfigHf, MlpLayerTypesAgainstDenseLayers) {
  json j = hf_config();
  j["mlp_layer_types"][0] = "sparse";
  EXPECT_EQ(message_for(j),
            "config.json: fields 'mlp_layer_types' and 'first_k_dense_replace' / 'moe_layer_freq' contradict: expected "
            "the same setting (they make layer 0 (0-based) dense, so mlp_layer_types[0] = \"dense\"), got "
            "mlp_layer_types[0] = \"sparse\" and first_k_dense_replace 1, moe_layer_freq 1, num_experts 16");
  // transformers ignores moe_layer_freq (every layer from first_k_dense_replace on is MoE): a config whose
  // moe_layer_freq makes layer 1 dense contradicts the mlp_layer_types transformers wrote.
  j = hf_config();
  j["moe_layer_freq"] = 2;
  EXPECT_KIMI_ERROR(parse_config(j.dump()), "they make layer 1 (0-based) dense", "mlp_layer_types[1] = \"sparse\"",
                    "moe_layer_freq 2");
  j = hf_config();
  j["mlp_layer_types"] = {"dense"};
  EXPECT_EQ(message_for(j),
            "config.json: field 'mlp_layer_types': expected a list of 9 (num_hidden_layers) \"dense\" / \"sparse\", "
            "got 1 entry");
}

TEST(ConfigHf, OtherNamesForSettings) {
  // transformers' attribute_map names, alone: read as the key kimi.cpp knows.
  json j = hf_config();
  j.erase("num_experts_per_token");
  j["num_experts_per_tok"] = 2;
  j.erase("num_shared_experts");
  j["n_shared_experts"] = 1;
  j.erase("moe_renormalize");
  j["norm_topk_prob"] = false;
  const Config c = parse_config(j.dump());
  EXPECT_EQ(c.num_experts_per_token, 2);
  EXPECT_EQ(c.num_shared_experts, 1);
  EXPECT_FALSE(c.moe_renormalize);
  // Beside the key: the same value is fine, another one is an error naming both.
  j = hf_config();
  j["num_local_experts"] = 16;
  EXPECT_EQ(parse_config(j.dump()).num_experts, 16);
  j["num_local_experts"] = 8;
  EXPECT_EQ(message_for(j),
            "config.json: fields 'num_experts' and 'num_local_experts' contradict: expected the same setting "
            "(transformers reads 'num_local_experts' as 'num_experts'), got 16 and 8");
}

TEST(ConfigHf, K3WrapperNamesTheTextConfigFields) {
  json j = json::parse(config_to_json(named_config("k3-tiny")));
  j["text_config"]["linear_num_heads"] = 8;
  EXPECT_KIMI_ERROR(parse_config(j.dump()),
                    "fields 'text_config.linear_num_heads' and 'text_config.linear_attn_config.num_heads' contradict",
                    "got 8 and 4");
}

}  // namespace
}  // namespace kimi::model
