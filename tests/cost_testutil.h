// tests/cost_testutil.h: the cost model tests' tiny config (tests/test_cost.cpp, tests/test_cost_ep.cpp).
#pragma once

#include "kimi/model/config.h"

namespace kimi::testutil {

// Two layers: 0 = KDA with a dense FFN, 1 = MLA with MoE. d 64, KDA 2 heads x 16 (P 32), MLA 2 heads, nope 8,
// rope 4, v 8, kv_lora 16, no q_lora; dense 32; 8 experts top-2, 1 shared of 32; vocabulary 100.
inline model::Config tiny_cost_config() {
  return model::parse_config(R"({"vocab_size":100,"hidden_size":64,"num_hidden_layers":2,
 "linear_attn_config":{"num_heads":2,"head_dim":16,"short_conv_kernel_size":4,"kda_layers":[1],"full_attn_layers":[2]},
 "num_attention_heads":2,"q_lora_rank":null,"kv_lora_rank":16,"qk_nope_head_dim":8,"qk_rope_head_dim":4,
 "v_head_dim":8,"intermediate_size":32,"first_k_dense_replace":1,"num_experts":8,"num_experts_per_token":2,
 "num_shared_experts":1,"moe_intermediate_size":32})",
                      "tiny");
}

}  // namespace kimi::testutil
