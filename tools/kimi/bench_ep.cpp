// tools/kimi/bench_ep.cpp: `kimi bench --ep N`'s per-row numbers (the contract: bench_ep.h).
#include "bench_ep.h"

#include <fmt/core.h>

#include <algorithm>


namespace kimi::cli {

namespace {
double ratio(double sum, int64_t n) { return n > 0 ? sum / double(n) : 0.0; }

std::string join_pairs(const std::vector<int64_t>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + std::to_string(v[i]);
  return s;
}
}  // namespace

std::array<double, 6> BenchEpRow::seconds() const {
  const dist::EpTotals& t = totals;
  return {t.route_s, t.plan_s, t.dispatch_s, t.expert_s, t.combine_s, t.tail_s};
}
double BenchEpRow::imbalance_before() const { return ratio(totals.home_imbalance, totals.steps_with_pairs); }
double BenchEpRow::imbalance_after() const { return ratio(totals.planned_imbalance, totals.steps_with_pairs); }

void add_since(dist::EpTotals& into, const dist::EpTotals& now, const dist::EpTotals& before) {
  into.layer_steps += now.layer_steps - before.layer_steps;
  into.pairs += now.pairs - before.pairs;
  into.moved_pairs += now.moved_pairs - before.moved_pairs;
  into.moved_segments += now.moved_segments - before.moved_segments;
  into.home_imbalance += now.home_imbalance - before.home_imbalance;
  into.planned_imbalance += now.planned_imbalance - before.planned_imbalance;
  into.steps_with_pairs += now.steps_with_pairs - before.steps_with_pairs;
  into.rank_pairs.resize(now.rank_pairs.size(), 0);
  for (size_t r = 0; r < now.rank_pairs.size(); ++r)
    into.rank_pairs[r] += now.rank_pairs[r] - (r < before.rank_pairs.size() ? before.rank_pairs[r] : 0);
  into.route_s += now.route_s - before.route_s;
  into.plan_s += now.plan_s - before.plan_s;
  into.dispatch_s += now.dispatch_s - before.dispatch_s;
  into.expert_s += now.expert_s - before.expert_s;
  into.combine_s += now.combine_s - before.combine_s;
  into.tail_s += now.tail_s - before.tail_s;
}

std::vector<double> max_over_ranks(dist::Comm& comm, std::span<const double> v) {
  const size_t n = v.size(), ranks = size_t(comm.size());
  std::vector<double> all(n * ranks);
  comm.all_gather(v.data(), n * sizeof(double), all.data());
  std::vector<double> out(v.begin(), v.end());
  for (size_t r = 0; r < ranks; ++r)
    for (size_t i = 0; i < n; ++i) out[i] = std::max(out[i], all[r * n + i]);
  return out;
}

std::string ep_table(const std::vector<EpTableRow>& rows) {
  std::string s = fmt::format("| {:>12} | {:>10} | {:>11} | {:>24} | {:>9} | {:>8} | {:>7} | {:>6} |", "test",
                              "batch/rank", "layer steps", "pairs per rank", "imb. home", "imb. EP", "moved %",
                              "shares");
  std::string rule = fmt::format("|{:->14}|{:->12}|{:->13}|{:->26}|{:->11}|{:->10}|{:->9}|{:->8}|", "", "", "", "", "",
                                 "", "", "");
  for (const char* p : kEpPhases) {
    s += fmt::format(" {:>17} |", fmt::format("{} ms r0/max", p));
    rule += fmt::format("{:->19}|", "");
  }
  s += "\n" + rule + "\n";
  for (const EpTableRow& row : rows) {
    const BenchEpRow& r = *row.ep;
    const dist::EpTotals& t = r.totals;
    s += fmt::format("| {:>12} | {:>10} | {:>11} | {:>24} | {:>9.3f} | {:>8.3f} | {:>7.1f} | {:>6} |", row.test,
                     row.batch, t.layer_steps, join_pairs(t.rank_pairs, " "), r.imbalance_before(),
                     r.imbalance_after(), t.pairs ? 100.0 * double(t.moved_pairs) / double(t.pairs) : 0.0,
                     t.moved_segments);
    // per step of a run: summed over the MoE layers, averaged over the timed runs' steps
    const double per = 1e3 / (double(std::max<int64_t>(r.runs, 1)) * r.steps_per_run);
    const std::array<double, 6> mine = r.seconds();
    for (size_t i = 0; i < kEpPhases.size(); ++i)
      s += fmt::format(" {:>17} |", fmt::format("{:.3f}/{:.3f}", per * mine[i], per * r.max_seconds[i]));
    s += "\n";
  }
  return s;
}

nlohmann::json ep_row_json(const BenchEpRow& r, int ranks, double job_tokens_per_s) {
  const dist::EpTotals& t = r.totals;
  nlohmann::json rank0 = nlohmann::json::object(), mx = nlohmann::json::object();
  const std::array<double, 6> mine = r.seconds();
  for (size_t i = 0; i < kEpPhases.size(); ++i) rank0[kEpPhases[i]] = mine[i], mx[kEpPhases[i]] = r.max_seconds[i];
  return {{"ranks", ranks},
          {"job_tokens_per_s", job_tokens_per_s},
          {"runs", r.runs},
          {"layer_steps", t.layer_steps},
          {"rank_pairs", t.rank_pairs},
          {"pairs", t.pairs},
          {"moved_pairs", t.moved_pairs},
          {"replica_shares", t.moved_segments},
          {"imbalance_before", r.imbalance_before()},
          {"imbalance_after", r.imbalance_after()},
          {"seconds_rank0", rank0},
          {"seconds_max", mx}};
}

std::string ep_csv_header() {
  std::string s = ",ranks,job_tokens_per_s,layer_steps,pairs,rank_pairs,moved_pairs,replica_shares,imbalance_before,"
                  "imbalance_after";
  for (const char* p : kEpPhases) s += fmt::format(",{}_s_rank0", p);
  for (const char* p : kEpPhases) s += fmt::format(",{}_s_max", p);
  return s;
}

std::string ep_csv_fields(const BenchEpRow& r, int ranks, double job_tokens_per_s) {
  const dist::EpTotals& t = r.totals;
  std::string s = fmt::format(",{},{},{},{},{},{},{},{},{}", ranks, job_tokens_per_s, t.layer_steps, t.pairs,
                              join_pairs(t.rank_pairs, " "), t.moved_pairs, t.moved_segments, r.imbalance_before(),
                              r.imbalance_after());
  for (double x : r.seconds()) s += fmt::format(",{}", x);
  for (double x : r.max_seconds) s += fmt::format(",{}", x);
  return s;
}

}  // namespace kimi::cli
