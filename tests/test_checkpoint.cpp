// kimi/model/checkpoint.h: random checkpoints in the real layout open and validate; mismatches between
// config.json and the tensors are reported by tensor name.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "expect_error.h"
#include "kimi/model/checkpoint.h"

namespace kimi::model {
namespace {

namespace fs = std::filesystem;

std::string temp_dir(const std::string& tag) {
  const fs::path p = fs::temp_directory_path() / ("kimi-ck-" + tag + "-" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p.string();
}

TEST(Checkpoint, RewritingADirectoryReplacesTheOldCheckpoint) {
  const std::string dir = temp_dir("rewrite");
  write_random_model(dir, named_config("kimi-linear-tiny"), {}, 1, 3);  // index + 3 shards
  std::ofstream(fs::path(dir) / "notes.txt") << "kept";
  write_random_model(dir, named_config("kimi-linear-tiny"), {}, 2, 1);  // one file
  EXPECT_FALSE(fs::exists(fs::path(dir) / "model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(fs::path(dir) / "model-00001-of-00003.safetensors"));
  EXPECT_TRUE(fs::exists(fs::path(dir) / "notes.txt"));
  const ModelFiles m = open_model(dir);
  EXPECT_EQ(m.checkpoint.names().size(), m.schema.size());
  fs::remove_all(dir);
}

TEST(Checkpoint, RandomModelsOpenAndValidate) {
  for (const char* name : {"k3-tiny", "kimi-linear-tiny"}) {
    for (int shards : {1, 3}) {
      const std::string dir = temp_dir(std::string(name) + std::to_string(shards));
      SchemaOptions so;
      so.mxfp4_experts = std::string(name) == "k3-tiny";
      write_random_model(dir, named_config(name), so, 7, shards);
      const ModelFiles m = open_model(dir);
      EXPECT_EQ(m.schema_options.mxfp4_experts, so.mxfp4_experts) << name;
      EXPECT_TRUE(m.unused.empty());
      EXPECT_EQ(m.checkpoint.names().size(), m.schema.size());
      // K3 layout: language_model. prefix and a zero-padded A_log of 128 entries.
      if (so.mxfp4_experts) {
        const TensorView a = m.checkpoint.get("language_model.model.layers.0.self_attn.A_log");
        EXPECT_EQ(a.shape_string(), "[128]");
        EXPECT_EQ(static_cast<const float*>(a.data)[127], 0.f);
        EXPECT_EQ(m.checkpoint.get("language_model.model.layers.1.block_sparse_moe.experts.3.w2.weight_packed").shape_string(),
                  "[128, 32]");
      } else {
        EXPECT_EQ(m.checkpoint.get("model.layers.0.self_attn.A_log").shape_string(), "[1, 1, 4, 1]");
      }
      fs::remove_all(dir);
    }
  }
}

TEST(Checkpoint, ReportsMissingTensorsAndShapeMismatches) {
  const std::string dir = temp_dir("bad");
  write_random_model(dir, named_config("kimi-linear-tiny"), {}, 1, 2);
  // A config whose KDA heads disagree with the tensors.
  {
    std::ifstream in(fs::path(dir) / "config.json");
    nlohmann::json j = nlohmann::json::parse(in);
    j["linear_attn_config"]["num_heads"] = 5;
    std::ofstream(fs::path(dir) / "config.json") << j.dump();
  }
  EXPECT_KIMI_ERROR(open_model(dir), "tensor 'model.layers.0.self_attn.q_proj.weight'", "expected shape [320, 256]",
                    "got [256, 256]");
  write_random_model(dir, named_config("kimi-linear-tiny"), {}, 1, 2);
  {
    std::ifstream in(fs::path(dir) / "model.safetensors.index.json");
    nlohmann::json j = nlohmann::json::parse(in);
    j["weight_map"].erase("model.norm.weight");
    std::ofstream(fs::path(dir) / "model.safetensors.index.json") << j.dump();
  }
  EXPECT_KIMI_ERROR(open_model(dir), "missing tensor 'model.norm.weight'");
  fs::remove_all(dir);
}

TEST(Checkpoint, RandomModelRefusesBadShardsAndPathsBeforeWriting) {
  const std::string dir = temp_dir("args");
  const Config c = named_config("kimi-linear-tiny");
  const size_t tensors = checkpoint_schema(c).size();
  const std::string range = "[1, " + std::to_string(tensors) + "]";
  for (int shards : {0, int(tensors) + 1, 100000}) {
    const std::string got = "got " + std::to_string(shards);
    EXPECT_KIMI_ERROR(write_random_model(dir, c, {}, 1, shards), "write_random_model: shards", range.c_str(), got.c_str());
  }
  EXPECT_FALSE(fs::exists(dir));
  // One shard per tensor is the most: every shard holds one tensor and the checkpoint opens.
  write_random_model(dir, c, {}, 1, int(tensors));
  EXPECT_EQ(open_model(dir).schema.size(), tensors);
  // A file where the directory should be, and a path below a file.
  const std::string file = (fs::path(dir) / "config.json").string();
  EXPECT_KIMI_ERROR(write_random_model(file, c, {}, 1), "write_random_model", file.c_str());
  const std::string sub = file + "/sub";
  EXPECT_KIMI_ERROR(write_random_model(sub, c, {}, 1), "write_random_model: cannot create the directory", sub.c_str(),
                    "Not a directory");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kimi::model
