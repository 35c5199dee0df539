// tools/kimi/bench_profile.h: `kimi bench --profile`: where a row's step time goes, per operator.
//
// A profiled row runs once more after its timed runs, under an OpProfiler (kimi/profile.h); the forward opens the
// cost model's layer kinds as scopes, so each (scope, op) line can be set beside the cost model's prediction of its
// layer kind (kimi/model/cost.h) for the same step. Numbers are per step (a tg row's n steps are averaged).
// "other" is the run's wall time less the operators' time: host work between operators (validation, index tables,
// the logits copy, launch gaps where the device waited for the host).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kimi/profile.h"

namespace kimi::cli {

struct RowProfile {
  std::vector<OpTiming> ops;                  // summed over the profiled run
  double wall_ms = 0;                         // the profiled run's wall time
  double steps = 1;                           // forwards in the run
  std::map<std::string, double> predicted_ms;  // per layer kind, per step (empty without a chip)
};

// The per-op table (largest first) and the per-scope summary with the predicted column, as text.
std::string profile_table(const std::string& title, const RowProfile& p);
nlohmann::json profile_json(const RowProfile& p);

}  // namespace kimi::cli
