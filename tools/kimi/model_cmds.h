// tools/kimi/model_cmds.h: `kimi random-model` and `kimi inspect`.
#pragma once

#include <cstdint>
#include <string>

namespace kimi::cli {

struct RandomModelOptions {
  std::string config = "k3-tiny";  // named config (SPEC 13) or a path to a config.json
  std::string out;
  uint64_t seed = 0;
  int shards = 1;
  std::string experts = "auto";  // auto (MXFP4 for K3 configs), mxfp4, bf16
};
int run_random_model(const RandomModelOptions& opt);
int run_inspect(const std::string& dir);

}  // namespace kimi::cli
