// kimi/model/checkpoint.h: opening a Hugging Face checkpoint directory of either model and checking it
// against the schema of its config (every tensor present, shape as the config implies, dtype allowed
// for its role). Errors name the tensor, the expected and the actual value.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kimi/model/config.h"
#include "kimi/model/safetensors.h"
#include "kimi/model/schema.h"

namespace kimi::model {

// Which routed experts a loaded Model keeps: keep(layer, expert); empty keeps all. The others are bound absent:
// never looked up in the checkpoint, so their mapped pages are never read (expert parallelism's holders-only ranks,
// docs/ep.md). A model missing experts runs only with ForwardOptions::moe (an EP step), and only on the CPU.
using ExpertFilter = std::function<bool(int64_t layer, int64_t expert)>;

struct ModelFiles {
  Config config;
  SchemaOptions schema_options;    // mxfp4_experts detected from the tensor names
  std::vector<TensorSpec> schema;
  Checkpoint checkpoint;
  std::vector<std::string> unused;  // tensors in the files that the schema does not name
};

// Reads dir/config.json and the safetensors files; validates. Copies no weights.
ModelFiles open_model(const std::string& dir);

// Writes a checkpoint in the real HF layout with random weights in realistic ranges (bf16 weights, fp32
// parameters, MXFP4 routed experts when opt.mxfp4_experts), and its config.json. shards > 1 writes
// model-0000k-of-0000n.safetensors files (contiguous runs of the schema's order, at least one tensor each:
// shards in [1, tensor count]) and model.safetensors.index.json. dir is created with its parents. Safetensors
// files of an earlier checkpoint in dir (model.safetensors, the index, model-*.safetensors) are removed first;
// nothing else is. Throws kimi::Error naming the path and the reason when dir cannot be created or written.
void write_random_model(const std::string& dir, const Config& c, const SchemaOptions& opt, uint64_t seed,
                        int shards = 1);

}  // namespace kimi::model
