// src/model/weights.h: a model's weights bound by role, per layer.
//
// A loaded model: every Weight / TensorView here points into the memory-mapped safetensors files (no copy),
// or, for a block placed on a GPU (kimi/model/placement.h), into that block's device copy held in
// device_copies. A random model (Model::random): into `created`, each tensor made on its block's device
// (home_device); a MoE layer's routed experts as slices of one [E, ...] tensor per projection and part. The only other owned tensors are f32 copies of small parameters the operators take as f32:
// KDA A_log (its first H entries, SPEC 5), dt_bias, and the router correction bias.
#pragma once

#include <functional>
#include <string>
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
  std::vector<Tensor> created;                       // a random model's weights, on their home devices
  std::vector<TensorView> created_views;             // a random model's tensors in schema order (views of created)
};

// A checkpoint tensor by name (every name of the schema resolves).
using TensorLookup = std::function<TensorView(const std::string& name)>;

// Binds the weights of config c by role: each tensor of checkpoint_schema(c, opt) from `get`. The small f32
// parameters are copied (converted when stored in another dtype, which needs a host tensor) onto the device
// their source lives on. keep_experts: the routed experts it rejects stay absent (MlpWeights{}) and their tensors
// are never passed to `get`.
ModelWeights bind_weights(const Config& c, const SchemaOptions& opt, const TensorLookup& get,
                          const ExpertFilter& keep_experts = {});
// Binds the weights of an opened (validated) checkpoint.
ModelWeights bind_weights(const ModelFiles& files, const ExpertFilter& keep_experts = {});

// Throws kimi::Error ("Model: argument 'device' / 'placement'") unless placement p fits config c (one entry
// per layer) and its devices exist in this build and process, at most one of them a GPU (one Context, one
// stream drives a forward). Every Model constructor checks this before anything is opened or allocated.
void check_placement_devices(const Config& c, const Placement& p);

// The device tensor s lives on under placement p: the device of the block that reads it (the embedding
// table: the embedding's; the final norm and lm_head: the head's). A random model makes each tensor there,
// so that place_weights finds every weight in place (the tied embedding is then copied to the head's device
// only when the two differ, as for a loaded model).
Device home_device(const TensorSpec& s, const Config& c, const Placement& p);

// Rebinds the weights of every block that runs on a GPU (p) to copies on that device, each source tensor
// uploaded once (the tied embedding / lm_head too); CPU blocks keep their views into the mapping. The small
// owned f32 parameters of a GPU block move to its device.
void place_weights(ModelWeights& w, const Config& c, const Placement& p);

}  // namespace kimi::model
