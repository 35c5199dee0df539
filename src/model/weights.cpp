// src/model/weights.cpp: binds checkpoint tensors to their roles (names from src/model/schema.cpp).
#include "model/weights.h"

#include <string>

#include "kimi/device.h"
#include "kimi/error.h"
#include "kimi/model/schema.h"

namespace kimi::model {
namespace {

// A contiguous float tensor as an owned f32 [n] of its first n values, on t's device: copied when t is f32
// (any device), converted on the host otherwise (checkpoint mappings are host memory).
Tensor first_as_f32(const TensorView& t, int64_t n, const std::string& name) {
  if (t.numel() < n) throw Error("bind_weights: tensor '" + name + "' has fewer than " + std::to_string(n) + " values");
  if (t.dtype == DType::f32 && t.is_contiguous()) {
    Tensor out(DType::f32, {n}, t.device);
    copy(out, TensorView(t.data, DType::f32, {n}, t.device));
    return out;
  }
  if (t.device != Device::cpu())
    throw Error("bind_weights: tensor '" + name + "': expected f32 on " + to_string(t.device) + ", got " +
                std::string(dtype_name(t.dtype)));
  Tensor out(DType::f32, {n});
  for (int64_t i = 0; i < n; ++i) out.data_as<float>()[i] = load_as_f32(t.data, t.dtype, i);
  return out;
}

// A [1, d] or [d] AttnRes projection as a [d] view.
TensorView as_vector(TensorView t) {
  const int64_t n = t.numel();
  return TensorView(t.data, t.dtype, {n}, t.device);
}

}  // namespace

ModelWeights bind_weights(const ModelFiles& files, const ExpertFilter& keep_experts) {
  const Checkpoint& ck = files.checkpoint;
  return bind_weights(files.config, files.schema_options, [&](const std::string& name) { return ck.get(name); },
                      keep_experts);
}

ModelWeights bind_weights(const Config& c, const SchemaOptions& opt, const TensorLookup& get,
                          const ExpertFilter& keep_experts) {
  const std::string pre = tensor_prefix(c);
  auto view = [&](const std::string& name) { return get(name); };
  auto dense = [&](const std::string& name) { return Weight{get(name + ".weight"), {}}; };
  auto weight_or_mxfp4 = [&](const std::string& name) {
    if (opt.mxfp4_experts) return Weight{get(name + ".weight_packed"), get(name + ".weight_scale")};
    return dense(name);
  };

  ModelWeights w;
  w.embed = view(pre + "embed_tokens.weight");
  w.final_norm = view(pre + "norm.weight");
  w.lm_head = c.tie_word_embeddings ? Weight{w.embed, {}} : Weight{view(lm_head_name(c)), {}};
  if (c.attn_res_block_size) {
    w.out_res_proj = as_vector(view(pre + "output_attn_res_proj.weight"));
    w.out_res_norm = view(pre + "output_attn_res_norm.weight");
  }
  w.layers.resize(size_t(c.num_hidden_layers));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    LayerWeights& L = w.layers[size_t(i)];
    const std::string p = pre + "layers." + std::to_string(i) + ".";
    L.input_norm = view(p + "input_layernorm.weight");
    L.post_norm = view(p + "post_attention_layernorm.weight");
    if (c.attn_res_block_size) {
      L.attn_res_proj = as_vector(view(p + "self_attention_res_proj.weight"));
      L.attn_res_norm = view(p + "self_attention_res_norm.weight");
      L.mlp_res_proj = as_vector(view(p + "mlp_res_proj.weight"));
      L.mlp_res_norm = view(p + "mlp_res_norm.weight");
    }
    const std::string a = p + "self_attn.";
    if (c.is_kda_layer(i)) {
      KdaLayerWeights& k = L.kda;
      const int64_t H = c.kda_num_heads, P = H * c.kda_head_dim;
      k.q = dense(a + "q_proj"), k.k = dense(a + "k_proj"), k.v = dense(a + "v_proj");
      k.conv_q = view(a + "q_conv1d.weight"), k.conv_k = view(a + "k_conv1d.weight"),
      k.conv_v = view(a + "v_conv1d.weight");
      k.f_a = dense(a + "f_a_proj"), k.f_b = dense(a + "f_b_proj"), k.b = dense(a + "b_proj");
      k.A_log = first_as_f32(view(a + "A_log"), H, a + "A_log");  // zero tail checked by open_model
      k.dt_bias = first_as_f32(view(a + "dt_bias"), P, a + "dt_bias");
      k.o_norm = view(a + "o_norm.weight");
      if (c.kda_full_rank_gate) {
        k.g = dense(a + "g_proj");
      } else {
        k.g_a = dense(a + "g_a_proj"), k.g_b = dense(a + "g_b_proj");
      }
      k.o = dense(a + "o_proj");
    } else {
      MlaLayerWeights& m = L.mla;
      if (c.q_lora_rank) {
        m.q_a = dense(a + "q_a_proj"), m.q_b = dense(a + "q_b_proj");
        m.q_a_norm = view(a + "q_a_layernorm.weight");
      } else {
        m.q = dense(a + "q_proj");
      }
      m.kv_a = dense(a + "kv_a_proj_with_mqa");
      m.kv_a_norm = view(a + "kv_a_layernorm.weight");
      m.kv_b = dense(a + "kv_b_proj");
      if (c.mla_use_output_gate) m.g = dense(a + "g_proj");
      m.o = dense(a + "o_proj");
    }
    FfnWeights& f = L.ffn;
    f.moe = c.is_moe_layer(i);
    if (!f.moe) {
      const std::string m = p + dense_mlp_prefix(opt.dense_mlp);
      f.dense = {dense(m + "gate_proj"), dense(m + "up_proj"), dense(m + "down_proj")};
      continue;
    }
    const std::string m = p + "block_sparse_moe.";
    f.router = dense(m + "gate");
    f.router_bias = first_as_f32(view(m + "gate.e_score_correction_bias"), c.num_experts, m + "gate.e_score_correction_bias");
    if (c.routed_expert_hidden_size) {
      f.latent_down = dense(m + "routed_expert_down_proj");
      f.latent_up = dense(m + "routed_expert_up_proj");
      if (c.latent_moe_use_norm) f.latent_norm = view(m + "routed_expert_norm.weight");
    }
    f.experts.reserve(size_t(c.num_experts));
    for (int64_t e = 0; e < c.num_experts; ++e) {
      if (keep_experts && !keep_experts(i, e)) {
        f.experts.emplace_back();  // absent: never looked up
        continue;
      }
      const std::string x = m + "experts." + std::to_string(e) + ".";
      f.experts.push_back({weight_or_mxfp4(x + "w1"), weight_or_mxfp4(x + "w3"), weight_or_mxfp4(x + "w2")});
    }
    if (c.num_shared_experts > 0) {
      f.has_shared = true;
      f.shared = {dense(m + "shared_experts.gate_proj"), dense(m + "shared_experts.up_proj"),
                  dense(m + "shared_experts.down_proj")};
    }
  }
  return w;
}

}  // namespace kimi::model
