// tools/kimi/plan_ep.h: `kimi plan --ep N[,N...]`, the expert-parallel step (kimi/model/cost_ep.h) of a
// config at each rank count: per-rank compute, dispatch / combine volumes over NVLink and InfiniBand, step
// time without and with overlap, tokens/s per GPU and in all, and the memory one GPU needs. plan_cmd.cpp
// checks every flag first.
#pragma once

#include <string>
#include <vector>

#include "kimi/model/cost_ep.h"

namespace kimi::cli {

struct EpPlan {
  model::Config config;
  std::string source;
  model::WeightFormat weights;
  model::Chip chip;                 // the first --chip
  model::Workload prefill, decode;  // per rank
  std::vector<int64_t> ranks;       // the --ep list
  model::Links links;
  int64_t redundant = 0;
  double published = 0;   // decode tok/s per GPU to compare with; 0 = none
  std::string json, csv;  // as PlanOptions
};
int run_plan_ep(const EpPlan& p);

// `kimi plan`'s --json / --csv output: text to `path` ("-": stdout); an error naming the flag when it cannot be
// written (plan_cmd.cpp).
void write_plan_output(const std::string& flag, const std::string& path, const std::string& text);

}  // namespace kimi::cli
