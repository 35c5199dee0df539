// kimi/model/config.h: the SPEC 13 configurations, 1-based layer lists, the K3 wrapper, bad configs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "expect_error.h"
#include "kimi/model/config.h"

namespace kimi::model {
namespace {

TEST(Config, K3TinyHasEverySwitchOn) {
  const Config c = named_config("k3-tiny");
  EXPECT_TRUE(c.k3_wrapper);
  EXPECT_EQ(c.num_hidden_layers, 9);
  const std::vector<MixerKind> kinds = {MixerKind::kda, MixerKind::kda, MixerKind::kda, MixerKind::mla, MixerKind::kda,
                                        MixerKind::kda, MixerKind::kda, MixerKind::mla, MixerKind::mla};
  EXPECT_EQ(c.layer_kinds, kinds);  // 1-based [4, 8, 9] -> 0-based 3, 7, 8
  EXPECT_TRUE(c.kda_full_rank_gate);
  ASSERT_TRUE(c.gate_lower_bound);
  EXPECT_FLOAT_EQ(*c.gate_lower_bound, -5.f);
  EXPECT_EQ(c.hidden_act, Activation::situ);
  EXPECT_EQ(c.routed_expert_hidden_size.value_or(0), 128);
  EXPECT_TRUE(c.latent_moe_use_norm);
  EXPECT_TRUE(c.mla_use_output_gate);
  EXPECT_EQ(c.attn_res_block_size.value_or(0), 4);
  EXPECT_FALSE(c.is_moe_layer(0));
  EXPECT_TRUE(c.is_moe_layer(1));
  EXPECT_EQ(c.q_lora_rank.value_or(0), 96);
}

TEST(Config, KimiLinearTinyHasEverySwitchOff) {
  const Config c = named_config("kimi-linear-tiny");
  EXPECT_FALSE(c.k3_wrapper);
  EXPECT_FALSE(c.kda_full_rank_gate);
  EXPECT_FALSE(c.gate_lower_bound);
  EXPECT_EQ(c.hidden_act, Activation::silu);
  EXPECT_FALSE(c.routed_expert_hidden_size);
  EXPECT_FALSE(c.q_lora_rank);
  EXPECT_FALSE(c.mla_use_output_gate);
  EXPECT_FALSE(c.attn_res_block_size);
  EXPECT_FLOAT_EQ(c.routed_scaling_factor, 2.446f);
}

TEST(Config, SituLinearBetaAbsentMeansIdentity) {
  EXPECT_FLOAT_EQ(named_config("k3-tiny").situ_linear_beta, 25.f);  // SPEC 13 sets it
  std::string j = config_to_json(named_config("k3-tiny"));
  const size_t p = j.find("\"activation_situ_linear_beta\"");
  ASSERT_NE(p, std::string::npos);
  j.erase(p, j.find('\n', p) - p + 1);  // drop the field (and its line)
  EXPECT_FLOAT_EQ(parse_config(j).situ_linear_beta, 0.f);  // identity on up (SPEC 7)
}

TEST(Config, JsonRoundTripKeepsEveryField) {
  for (const char* name : {"k3-tiny", "kimi-linear-tiny"}) {
    const Config a = named_config(name);
    const Config b = parse_config(config_to_json(a));
    EXPECT_EQ(config_to_json(a), config_to_json(b)) << name;
    EXPECT_EQ(a.k3_wrapper, b.k3_wrapper);
  }
}

TEST(Config, RejectsInconsistentConfigs) {
  const std::string good = config_to_json(named_config("kimi-linear-tiny"));
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const size_t p = s.find(from);
    EXPECT_NE(p, std::string::npos) << from;
    return s.replace(p, from.size(), to);
  };
  EXPECT_KIMI_ERROR(parse_config("{oops"), "not valid JSON");
  EXPECT_KIMI_ERROR(parse_config(with("\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\"")), "'hidden_act'", "\"gelu\"");
  EXPECT_KIMI_ERROR(parse_config(with("\"hidden_size\": 256", "\"hidden_size\": \"256\"")), "'hidden_size'", "an integer");
  EXPECT_KIMI_ERROR(parse_config(with("\"hidden_size\": 256", "\"hidden_size\": 0")), "'hidden_size'", ">= 1", "0");
  EXPECT_KIMI_ERROR(parse_config(with("\"num_experts_per_token\": 4", "\"num_experts_per_token\": 17")),
                    "'num_experts_per_token'", "<= num_experts (16)", "17");
  EXPECT_KIMI_ERROR(parse_config(with("\"mla_use_nope\": true", "\"mla_use_nope\": false")), "'mla_use_nope'");
  // layer 4 listed twice, then layer 4 missing
  std::string dup = good;
  dup.replace(dup.find("\"full_attn_layers\": ["), 21, "\"full_attn_layers\": [3,");
  EXPECT_KIMI_ERROR(parse_config(dup), "linear_attn_config.full_attn_layers", "layer 3 twice");
  std::string out_of_range = good;
  out_of_range.replace(out_of_range.find("\"full_attn_layers\": ["), 21, "\"full_attn_layers\": [10,");
  EXPECT_KIMI_ERROR(parse_config(out_of_range), "full_attn_layers", "[1, 9]", "10");
  EXPECT_KIMI_ERROR(named_config("k4"), "unknown configuration 'k4'");
}

// K3's layout: {"model_type": "kimi_k3", "text_config": {"model_type": "kimi_linear", ...}}. Both model_type
// fields are checked, and a K3 config without its wrapper is reported as such.
TEST(Config, ChecksBothModelTypesOfTheK3Wrapper) {
  const nlohmann::json k3 = nlohmann::json::parse(config_to_json(named_config("k3-tiny")));
  ASSERT_EQ(k3["model_type"], "kimi_k3");
  ASSERT_EQ(k3["text_config"]["model_type"], "kimi_linear");
  auto error = [](const nlohmann::json& j) {
    return testutil::error_message_of([&] { parse_config(j.dump(), "/m/config.json"); });
  };
  nlohmann::json llama = k3;
  llama["model_type"] = "llama";
  EXPECT_EQ(error(llama),
            "/m/config.json: field 'model_type': expected \"kimi_k3\" (the K3 wrapper around 'text_config'; "
            "Kimi-Linear configs have no text_config), got \"llama\"");
  nlohmann::json inner = k3;
  inner["text_config"]["model_type"] = "kimi_k3";
  EXPECT_EQ(
      error(inner),
      "/m/config.json: field 'text_config.model_type': expected \"kimi_linear\" (the text model inside a K3 "
      "config), got \"kimi_k3\"");
  // The text model's fields at the top level under K3's model_type: the wrapper is missing.
  nlohmann::json unwrapped = k3["text_config"];
  unwrapped["model_type"] = "kimi_k3";
  EXPECT_EQ(
      error(unwrapped),
      "/m/config.json: field 'text_config': expected an object holding the text model (a \"kimi_k3\" config "
      "wraps its \"kimi_linear\" text model in 'text_config'), got nothing (missing)");
  nlohmann::json other = k3["text_config"];
  other["model_type"] = "deepseek_v3";
  EXPECT_EQ(
      error(other),
      "/m/config.json: field 'model_type': expected \"kimi_linear\" (Kimi-Linear), or \"kimi_k3\" with a "
      "'text_config' (K3), got \"deepseek_v3\"");
  nlohmann::json scalar = k3;
  scalar["text_config"] = 3;
  EXPECT_EQ(error(scalar),
            "/m/config.json: field 'text_config': expected an object (the K3 text model), got 3");
  // Absent model_type fields are taken as the layout implies.
  nlohmann::json bare = k3;
  bare.erase("model_type");
  bare["text_config"].erase("model_type");
  EXPECT_TRUE(parse_config(bare.dump()).k3_wrapper);
  nlohmann::json kl = nlohmann::json::parse(config_to_json(named_config("kimi-linear-tiny")));
  kl.erase("model_type");
  EXPECT_FALSE(parse_config(kl.dump()).k3_wrapper);
}

TEST(Config, RepeatedKeysAndUnprintableValuesAreReportedSafely) {
  const std::string good = config_to_json(named_config("kimi-linear-tiny"));
  std::string dup = good;
  dup.replace(dup.find("\"hidden_size\": 256"), 19, "\"hidden_size\": 256, \"hidden_size\": 512");
  EXPECT_KIMI_ERROR(parse_config(dup, "/m/config.json"),
                    "/m/config.json: key 'hidden_size' appears twice in the top-level object");
  std::string nested = good;
  nested.replace(nested.find("\"num_heads\": 4"), 14, "\"num_heads\": 4, \"num_heads\": 8");
  EXPECT_KIMI_ERROR(parse_config(nested), "key 'num_heads' appears twice in object 'linear_attn_config'");
  // A control character (decoded from \u001b) and non-ASCII text come back escaped, never raw.
  std::string act = good;
  act.replace(act.find("\"hidden_act\": \"silu\""), 20, "\"hidden_act\": \"\\u001b[2Jsil\u00fc\"");
  EXPECT_KIMI_ERROR(parse_config(act),
                    "field 'hidden_act': expected \"silu\" or \"situ\", got \"\\u001b[2Jsil\\u00fc\"");
}

}  // namespace
}  // namespace kimi::model
