// src/model/weights.h: a model's weights bound by role, per layer (views into the checkpoint mapping).
//
// Every Weight / TensorView here points into the memory-mapped safetensors files (no copy), or, for a
// block placed on a GPU (kimi/model/placement.h), into that block's device copy held in device_copies.
// The only other owned tensors are f32 conversions of small parameters the operators take as f32: KDA
// A_log (its first H entries, SPEC 5), dt_bias, and the router correction bias.
#pragma once

#include <vector>

#include "kimi/model/checkpoint.h"
#include "kimi/model/placement.h"
#include "kimi/ops/linear.h"
#include "kimi/ops/moe.h"
#include "kimi/tensor.h"

namespace kimi::model {

struct KdaLayerWeights {
  Weight q, k, v;                  // [P, d]
  TensorView conv_q, conv_k, conv_v;  // [P, 1, W] (fp32 in checkpoints)
  Weight f_a, f_b;                 // [K, d], [P, K]
  Weight b;                        // [H, d]
  Tensor A_log;                    // f32 [H]
  Tensor dt_bias;                  // f32 [P]
  TensorView o_norm;               // [K]
  Weight g;                        // full-rank output gate [P, d] (K3), or absent
  Weight g_a, g_b;                 // low-rank output gate [K, d], [P, K] (Kimi-Linear), or absent
  Weight o;                        // [d, P]
};

struct MlaLayerWeights {
  Weight q;                        // [H*(Dn+Pr), d] without q_lora, else absent
  Weight q_a, q_b;                 // [r, d], [H*(Dn+Pr), r] with q_lora
  TensorView q_a_norm;             // [r]
  Weight kv_a;                     // [R+Pr, d]
  TensorView kv_a_norm;            // [R]
  Weight kv_b;                     // [H*(Dn+Dv), R]
  Weight g;                        // output gate [H*Dv, d] (K3), or absent
  Weight o;                        // [d, H*Dv]
};

struct FfnWeights {
  bool moe = false;
  MlpWeights dense;                // dense layers: gate/up [I, d], down [d, I]
  // MoE layers
  Weight router;                   // [E, d]
  Tensor router_bias;              // f32 [E]
  Weight latent_down, latent_up;   // [Dl, d], [d, Dl] (K3), or absent
  TensorView latent_norm;          // [Dl] or absent
  std::vector<MlpWeights> experts; // E experts (dense or MXFP4)
  bool has_shared = false;
  MlpWeights shared;               // [num_shared*I, d] ...
};

struct LayerWeights {
  TensorView input_norm, post_norm;                  // [d]
  TensorView attn_res_proj, attn_res_norm;           // [d] (Block AttnRes), or absent
  TensorView mlp_res_proj, mlp_res_norm;             // [d]
  KdaLayerWeights kda;                               // KDA layers
  MlaLayerWeights mla;                               // MLA layers
  FfnWeights ffn;
};

struct ModelWeights {
  TensorView embed;                                  // [vocab, d]
  std::vector<LayerWeights> layers;
  TensorView final_norm;                             // [d]
  TensorView out_res_proj, out_res_norm;             // [d] (Block AttnRes), or absent
  Weight lm_head;                                    // [vocab, d] (the embedding when tied)
  std::vector<Tensor> device_copies;                 // the GPU blocks' weights (place_weights): owned here
};

// Binds the weights of an opened (validated) checkpoint.
ModelWeights bind_weights(const ModelFiles& files);

// Rebinds the weights of every block that runs on a GPU (p) to copies on that device, each source tensor
// uploaded once (the tied embedding / lm_head too); CPU blocks keep their views into the mapping. The small
// owned f32 parameters of a GPU block move to its device.
void place_weights(ModelWeights& w, const Config& c, const Placement& p);

}  // namespace kimi::model
