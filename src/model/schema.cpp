// Implementation of kimi/model/schema.h: the SPEC 11 tensor list.
#include "kimi/model/schema.h"

#include "kimi/error.h"

namespace kimi::model {

const char* dense_mlp_prefix(DenseMlpName n) { return n == DenseMlpName::mlp ? "mlp." : "block_sparse_moe."; }

std::string tensor_prefix(const Config& c) { return c.k3_wrapper ? "language_model.model." : "model."; }
std::string lm_head_name(const Config& c) {
  return c.k3_wrapper ? "language_model.lm_head.weight" : "lm_head.weight";
}

std::vector<TensorSpec> checkpoint_schema(const Config& c, const SchemaOptions& opt) {
  std::vector<TensorSpec> s;
  const std::string pre = tensor_prefix(c);
  const int64_t d = c.hidden_size;
  auto add = [&](std::string name, std::vector<int64_t> shape, TensorRole role = TensorRole::weight, int64_t layer = -1,
                 bool routed = false, std::vector<std::vector<int64_t>> alt = {}) {
    s.push_back({std::move(name), std::move(shape), role, layer, routed, std::move(alt)});
  };

  add(pre + "embed_tokens.weight", {c.vocab_size, d});
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string L = pre + "layers." + std::to_string(i) + ".";
    add(L + "input_layernorm.weight", {d}, TensorRole::weight, i);
    add(L + "post_attention_layernorm.weight", {d}, TensorRole::weight, i);
    if (c.attn_res_block_size) {
      for (const char* r : {"self_attention_res_", "mlp_res_"}) {
        add(L + r + "norm.weight", {d}, TensorRole::weight, i);
        add(L + r + "proj.weight", {1, d}, TensorRole::weight, i, false, {{d}});
      }
    }
    const std::string A = L + "self_attn.";
    if (c.is_kda_layer(i)) {
      const int64_t H = c.kda_num_heads, K = c.kda_head_dim, P = H * K;
      for (const char* p : {"q", "k", "v"}) {
        add(A + p + "_proj.weight", {P, d}, TensorRole::weight, i);
        add(A + p + "_conv1d.weight", {P, 1, c.conv_kernel}, TensorRole::fp32_param, i, false, {{P, c.conv_kernel}});
      }
      add(A + "f_a_proj.weight", {K, d}, TensorRole::weight, i);
      add(A + "f_b_proj.weight", {P, K}, TensorRole::weight, i);
      add(A + "b_proj.weight", {H, d}, TensorRole::weight, i);
      // NOTE: K3 stores A_log as fp32[128] (first H meaningful, zero tail), Kimi-Linear as [1, 1, H, 1].
      if (c.k3_wrapper) {
        add(A + "A_log", {std::max<int64_t>(H, 128)}, TensorRole::fp32_param, i, false, {{H}, {1, 1, H, 1}});
      } else {
        add(A + "A_log", {1, 1, H, 1}, TensorRole::fp32_param, i, false, {{H}});
      }
      add(A + "dt_bias", {P}, TensorRole::fp32_param, i);
      add(A + "o_norm.weight", {K}, TensorRole::fp32_param, i);
      if (c.kda_full_rank_gate) {
        add(A + "g_proj.weight", {P, d}, TensorRole::weight, i);
      } else {
        add(A + "g_a_proj.weight", {K, d}, TensorRole::weight, i);
        add(A + "g_b_proj.weight", {P, K}, TensorRole::weight, i);
      }
      add(A + "o_proj.weight", {d, P}, TensorRole::weight, i);
    } else {
      const int64_t H = c.num_attention_heads, qk = c.qk_nope_head_dim + c.qk_rope_head_dim;
      if (c.q_lora_rank) {
        add(A + "q_a_proj.weight", {*c.q_lora_rank, d}, TensorRole::weight, i);
        add(A + "q_a_layernorm.weight", {*c.q_lora_rank}, TensorRole::weight, i);
        add(A + "q_b_proj.weight", {H * qk, *c.q_lora_rank}, TensorRole::weight, i);
      } else {
        add(A + "q_proj.weight", {H * qk, d}, TensorRole::weight, i);
      }
      add(A + "kv_a_proj_with_mqa.weight", {c.kv_lora_rank + c.qk_rope_head_dim, d}, TensorRole::weight, i);
      add(A + "kv_a_layernorm.weight", {c.kv_lora_rank}, TensorRole::weight, i);
      add(A + "kv_b_proj.weight", {H * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank}, TensorRole::weight, i);
      if (c.mla_use_output_gate) add(A + "g_proj.weight", {H * c.v_head_dim, d}, TensorRole::weight, i);
      add(A + "o_proj.weight", {d, H * c.v_head_dim}, TensorRole::weight, i);
    }
    if (c.is_moe_layer(i)) {
      const std::string M = L + "block_sparse_moe.";
      const int64_t E = c.num_experts, I = c.moe_intermediate_size;
      const int64_t dl = c.routed_expert_hidden_size.value_or(d);
      add(M + "gate.weight", {E, d}, TensorRole::weight, i);
      add(M + "gate.e_score_correction_bias", {E}, TensorRole::fp32_param, i);
      if (c.routed_expert_hidden_size) {
        add(M + "routed_expert_down_proj.weight", {dl, d}, TensorRole::weight, i);
        if (c.latent_moe_use_norm) add(M + "routed_expert_norm.weight", {dl}, TensorRole::weight, i);
        add(M + "routed_expert_up_proj.weight", {d, dl}, TensorRole::weight, i);
      }
      if (c.num_shared_experts > 0) {
        const int64_t si = c.num_shared_experts * I;
        add(M + "shared_experts.gate_proj.weight", {si, d}, TensorRole::weight, i);
        add(M + "shared_experts.up_proj.weight", {si, d}, TensorRole::weight, i);
        add(M + "shared_experts.down_proj.weight", {d, si}, TensorRole::weight, i);
      }
      if (opt.mxfp4_experts && (dl % 32 != 0 || I % 32 != 0))
        throw Error("checkpoint_schema: MXFP4 routed experts need the expert widths divisible by 32, got latent " +
                    std::to_string(dl) + " and moe_intermediate_size " + std::to_string(I));
      for (int64_t e = 0; e < E; ++e) {
        const std::string X = M + "experts." + std::to_string(e) + ".";
        const std::pair<const char*, std::pair<int64_t, int64_t>> ws[] = {{"w1", {I, dl}}, {"w3", {I, dl}}, {"w2", {dl, I}}};
        for (const auto& [w, oi] : ws) {
          if (opt.mxfp4_experts) {
            add(X + w + ".weight_packed", {oi.first, oi.second / 2}, TensorRole::mxfp4_packed, i, true);
            add(X + w + ".weight_scale", {oi.first, oi.second / 32}, TensorRole::mxfp4_scale, i, true);
          } else {
            add(X + w + ".weight", {oi.first, oi.second}, TensorRole::weight, i, true);
          }
        }
      }
    } else {
      const std::string M = L + dense_mlp_prefix(opt.dense_mlp);
      add(M + "gate_proj.weight", {c.intermediate_size, d}, TensorRole::weight, i);
      add(M + "up_proj.weight", {c.intermediate_size, d}, TensorRole::weight, i);
      add(M + "down_proj.weight", {d, c.intermediate_size}, TensorRole::weight, i);
    }
  }
  add(pre + "norm.weight", {d});
  if (c.attn_res_block_size) {
    add(pre + "output_attn_res_norm.weight", {d});
    add(pre + "output_attn_res_proj.weight", {1, d}, TensorRole::weight, -1, false, {{d}});
  }
  if (!c.tie_word_embeddings) add(lm_head_name(c), {c.vocab_size, d});
  return s;
}

}  // namespace kimi::model
