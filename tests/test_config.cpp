// kimi/model/config.h: the SPEC 13 configurations, 1-based layer lists, the K3 wrapper, bad configs.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace kimi::model
