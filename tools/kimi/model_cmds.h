// tools/kimi/model_cmds.h: `kimi random-model`, `kimi inspect` and `kimi generate`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kimi/tensor.h"

namespace kimi::cli {

struct RandomModelOptions {
  std::string config = "k3-tiny";  // named config (SPEC 13) or a path to a config.json
  std::string out;
  uint64_t seed = 0;
  int shards = 1;
  std::string experts = "auto";  // auto (MXFP4 for K3 configs), mxfp4, bf16
};
int run_random_model(const RandomModelOptions& opt);
// device: "cpu" or "cuda[:i]": also prints the placement plan of the model's blocks on that device.
int run_inspect(const std::string& dir, const std::string& device = "cpu");

struct GenerateCmdOptions {
  std::string dir;
  std::vector<std::string> prompts;  // comma-separated token ids, one string per sequence
  int64_t max_tokens = 16;
  float temperature = 0.f;
  int top_k = 0;
  float top_p = 1.f;
  uint64_t seed = 0;
  std::vector<int32_t> stop;
  int threads = 0;
  bool warmup = false;  // run the generation once untimed first (weights paged in, caches warm)
  std::string device = "cpu";  // cpu, cuda or cuda:i
};
int run_generate(const GenerateCmdOptions& opt);  // tools/kimi/generate_cmd.cpp

// "cpu", "cuda" (= cuda:0) or "cuda:i"; throws kimi::Error naming `option` otherwise.
Device parse_device(const std::string& s, const std::string& option);

}  // namespace kimi::cli
