// kimi/model/schema.h: every tensor a Kimi K3 / Kimi-Linear checkpoint holds, by name, shape and dtype,
// derived from the Config (SPEC 1, 10, 11). The loader checks a checkpoint against it (missing tensors,
// shape mismatches, unsupported dtypes are errors naming the tensor); `kimi random-model` writes it;
// `kimi inspect` counts parameters with it.
//
// Names: Kimi-Linear under `model.` (+ `lm_head.weight`); K3 under `language_model.model.`
// (+ `language_model.lm_head.weight`). Per layer `layers.{i}.` (0-based, as in the checkpoints).
#pragma once

#include <string>
#include <vector>

#include "kimi/dtype.h"
#include "kimi/model/config.h"

namespace kimi::model {

enum class TensorRole : uint8_t {
  weight,        // bf16 in real checkpoints (f32/f16 accepted)
  fp32_param,    // A_log, dt_bias, conv weights, o_norm, router bias: kept fp32 (never downcast)
  mxfp4_packed,  // routed experts in K3: u8 [out, in/2]
  mxfp4_scale,   // u8 [out, in/32]
};

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  TensorRole role = TensorRole::weight;
  int64_t layer = -1;       // -1: not in a decoder layer
  bool routed_expert = false;
  // Accepted alternative shapes (e.g. A_log stored as [1, 1, H, 1] by Kimi-Linear).
  std::vector<std::vector<int64_t>> alt_shapes;
};

// Where a dense (non-MoE) layer's MLP lives: `layers.{i}.mlp.` (the released checkpoints, random-model) or
// `layers.{i}.block_sparse_moe.` (transformers 5's save_pretrained of Kimi-Linear: its conversion mapping renames
// every `block_sparse_moe.` to `mlp.` at load and back at save, the dense layers' `mlp.` included;
// docs/model/checkpoint-names.md). MoE layers are `block_sparse_moe.` in both.
enum class DenseMlpName : uint8_t { mlp, block_sparse_moe };

struct SchemaOptions {
  bool mxfp4_experts = false;  // routed experts stored as MXFP4 (K3 ships them so)
  DenseMlpName dense_mlp = DenseMlpName::mlp;
};

// "mlp." or "block_sparse_moe.".
const char* dense_mlp_prefix(DenseMlpName n);

std::vector<TensorSpec> checkpoint_schema(const Config& c, const SchemaOptions& opt = {});
std::string tensor_prefix(const Config& c);  // "model." or "language_model.model."
std::string lm_head_name(const Config& c);

}  // namespace kimi::model
