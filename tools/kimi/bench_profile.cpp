// Implementation of tools/kimi/bench_profile.h.
#include "bench_profile.h"

#include <fmt/core.h>

#include <algorithm>

namespace kimi::cli {

namespace {

double op_sum(const RowProfile& p) {
  double s = 0;
  for (const OpTiming& t : p.ops) s += t.ms;
  return s;
}

// Per scope, in order of first appearance: the measured ms of its operators.
std::vector<std::pair<std::string, double>> by_scope(const RowProfile& p) {
  std::vector<std::pair<std::string, double>> v;
  for (const OpTiming& t : p.ops) {
    auto it = std::find_if(v.begin(), v.end(), [&](const auto& e) { return e.first == t.scope; });
    if (it == v.end()) v.push_back({t.scope, t.ms});
    else it->second += t.ms;
  }
  return v;
}

}  // namespace

std::string profile_table(const std::string& title, const RowProfile& p) {
  const double steps = p.steps, wall = p.wall_ms / steps;
  std::vector<OpTiming> ops = p.ops;
  std::stable_sort(ops.begin(), ops.end(), [](const OpTiming& a, const OpTiming& b) { return a.ms > b.ms; });
  std::string s = fmt::format("profile {}: {:.3f} ms per step (wall time of one profiled run)\n", title, wall);
  s += fmt::format("| {:<10} | {:<22} | {:>10} | {:>10} | {:>6} |\n", "scope", "op", "calls/step", "ms/step", "share");
  s += "|------------|------------------------|-----------:|-----------:|-------:|\n";
  auto line = [&](const std::string& scope, const std::string& op, double calls, double ms) {
    s += fmt::format("| {:<10} | {:<22} | {:>10.1f} | {:>10.3f} | {:>5.1f}% |\n", scope, op, calls, ms,
                     wall > 0 ? 100 * ms / wall : 0.0);
  };
  for (const OpTiming& t : ops) line(t.scope.empty() ? "-" : t.scope, t.op, double(t.calls) / steps, t.ms / steps);
  line("other", "(host, copies, gaps)", 0, std::max(0.0, wall - op_sum(p) / steps));
  if (!p.predicted_ms.empty()) {
    s += fmt::format("| {:<10} | {:>12} | {:>12} | {:>9} |\n", "scope", "measured ms", "predicted ms", "pred/meas");
    s += "|------------|-------------:|-------------:|----------:|\n";
    for (const auto& [scope, ms] : by_scope(p)) {
      const auto it = p.predicted_ms.find(scope);
      const double pred = it == p.predicted_ms.end() ? 0 : it->second;
      s += fmt::format("| {:<10} | {:>12.3f} | {:>12.3f} | {:>8.0f}% |\n", scope.empty() ? "-" : scope, ms / steps, pred,
                       ms > 0 ? 100 * pred / (ms / steps) : 0.0);
    }
  }
  return s;
}

nlohmann::json profile_json(const RowProfile& p) {
  nlohmann::json ops = nlohmann::json::array();
  for (const OpTiming& t : p.ops)
    ops.push_back({{"scope", t.scope},
                   {"op", t.op},
                   {"device", to_string(t.device)},
                   {"calls_per_step", double(t.calls) / p.steps},
                   {"ms_per_step", t.ms / p.steps}});
  nlohmann::json j = {{"wall_ms_per_step", p.wall_ms / p.steps},
                      {"other_ms_per_step", std::max(0.0, (p.wall_ms - op_sum(p)) / p.steps)},
                      {"ops", ops}};
  if (!p.predicted_ms.empty()) j["predicted_ms_per_step"] = p.predicted_ms;
  return j;
}

}  // namespace kimi::cli
