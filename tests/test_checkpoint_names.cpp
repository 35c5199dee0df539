// tests/test_checkpoint_names.cpp: both spellings of a dense layer's MLP load (kimi/model/schema.h DenseMlpName):
// `mlp.` (the released checkpoints) and `block_sparse_moe.` (transformers 5's save_pretrained of Kimi-Linear). A
// checkpoint renamed the second way opens, binds and gives exactly the logits of the original.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "expect_error.h"
#include "kimi/model/checkpoint.h"
#include "kimi/model/model.h"
#include "model_testutil.h"
#include "temp_dir.h"

namespace kimi::model {
namespace {

namespace fs = std::filesystem;
using kimi::testutil::error_message_of;
using kimi::testutil::TempDir;

// Copies checkpoint `from` into `to` (one safetensors file + config.json), each tensor under rename(name); a name
// rename maps to "" is dropped.
void copy_renamed(const std::string& from, const std::string& to,
                  const std::function<std::string(std::string)>& rename) {
  const Checkpoint ck(from);
  std::vector<TensorToWrite> out;
  for (const std::string& n : ck.names()) {
    const std::string m = rename(n);
    if (!m.empty()) out.push_back({m, ck.get(n)});
  }
  fs::create_directories(to);
  write_safetensors((fs::path(to) / "model.safetensors").string(), out, {{"format", "pt"}});
  fs::copy_file(fs::path(from) / "config.json", fs::path(to) / "config.json", fs::copy_options::overwrite_existing);
}

// "….layers.{i}.mlp.x" -> "….layers.{i}.block_sparse_moe.x" for the layers in `layers`.
std::function<std::string(std::string)> mlp_as_block_sparse_moe(std::vector<int> layers) {
  return [layers](std::string n) {
    for (int i : layers) {
      const std::string from = ".layers." + std::to_string(i) + ".mlp.";
      const size_t at = n.find(from);
      if (at != std::string::npos) n.replace(at, from.size(), ".layers." + std::to_string(i) + ".block_sparse_moe.");
    }
    return n;
  };
}

TEST(CheckpointNames, DenseMlpUnderBlockSparseMoeLoadsWithTheSameLogits) {
  for (const char* name : {"kimi-linear-tiny", "k3-tiny"}) {
    const std::string orig = testutil::tiny_dir(name);
    TempDir dir("kimi-names");
    const std::string renamed = dir.file("hf5");
    copy_renamed(orig, renamed, mlp_as_block_sparse_moe({0}));
    const ModelFiles m = open_model(renamed);
    EXPECT_EQ(m.schema_options.dense_mlp, DenseMlpName::block_sparse_moe) << name;
    EXPECT_TRUE(m.unused.empty()) << name;
    const std::string pre = tensor_prefix(m.config);
    EXPECT_TRUE(m.checkpoint.has(pre + "layers.0.block_sparse_moe.gate_proj.weight"));
    EXPECT_FALSE(m.checkpoint.has(pre + "layers.0.mlp.gate_proj.weight"));
    EXPECT_EQ(open_model(orig).schema_options.dense_mlp, DenseMlpName::mlp);

    const Model a(orig), b(renamed);
    const std::vector<int32_t> tokens = testutil::random_tokens(12, 5, a.config().vocab_size);
    const std::vector<float> la = testutil::logits_in_pieces(a, tokens, {12});
    const std::vector<float> lb = testutil::logits_in_pieces(b, tokens, {12});
    ASSERT_EQ(la.size(), lb.size());
    EXPECT_EQ(la, lb) << name;  // the same weights bound to the same roles: bit-identical
  }
}

TEST(CheckpointNames, BothSpellingsInOneLayerAreAnError) {
  const std::string orig = testutil::tiny_dir("kimi-linear-tiny");
  TempDir dir("kimi-names");
  const std::string both = dir.file("both");
  // Every tensor as it is, plus layer 0's gate_proj a second time under block_sparse_moe.
  const Checkpoint ck(orig);
  std::vector<TensorToWrite> out;
  for (const std::string& n : ck.names()) out.push_back({n, ck.get(n)});
  out.push_back({"model.layers.0.block_sparse_moe.gate_proj.weight", ck.get("model.layers.0.mlp.gate_proj.weight")});
  fs::create_directories(both);
  write_safetensors((fs::path(both) / "model.safetensors").string(), out);
  fs::copy_file(fs::path(orig) / "config.json", fs::path(both) / "config.json");
  EXPECT_EQ(error_message_of([&] { open_model(both); }),
            "checkpoint " + both + ": dense layer 0: expected its MLP under one name, got both "
            "'model.layers.0.mlp.gate_proj.weight' and 'model.layers.0.block_sparse_moe.gate_proj.weight'");
}

TEST(CheckpointNames, MixedSpellingsAcrossDenseLayersNameTheMissingTensor) {
  // Two dense layers (first_k_dense_replace 2), layer 0 spelled as transformers 5 writes it, layer 1 not.
  TempDir dir("kimi-names");
  nlohmann::json j = nlohmann::json::parse(config_to_json(named_config("kimi-linear-tiny")));
  j["first_k_dense_replace"] = 2;
  const Config c = parse_config(j.dump());
  const std::string orig = dir.file("orig"), mixed = dir.file("mixed");
  write_random_model(orig, c, {}, 3);
  copy_renamed(orig, mixed, mlp_as_block_sparse_moe({0}));
  EXPECT_EQ(error_message_of([&] { open_model(mixed); }),
            "checkpoint " + mixed + ": missing tensor 'model.layers.1.block_sparse_moe.gate_proj.weight' (required by "
            "config.json; dense MLPs are read under 'block_sparse_moe.', as dense layer 0 spells it)");
  // Layer 0's MLP under neither name.
  const std::string none = dir.file("none");
  copy_renamed(orig, none, [](std::string n) { return n.find(".layers.0.mlp.") != std::string::npos ? "" : n; });
  EXPECT_EQ(error_message_of([&] { open_model(none); }),
            "checkpoint " + none + ": missing tensor 'model.layers.0.mlp.gate_proj.weight' (required by config.json; "
            "nor is it there as 'model.layers.0.block_sparse_moe.gate_proj.weight', as transformers 5 saves it)");
  // Both layers renamed: loads.
  const std::string all = dir.file("all");
  copy_renamed(orig, all, mlp_as_block_sparse_moe({0, 1}));
  EXPECT_EQ(open_model(all).schema_options.dense_mlp, DenseMlpName::block_sparse_moe);
}

}  // namespace
}  // namespace kimi::model
