// tools/kimi/generate_ep.cpp: `kimi generate --ep N` (the contract: generate_ep.h).
#include "generate_ep.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kimi/error.h"

namespace kimi::cli {

void check_ep_flags(const GenerateCmdOptions& opt) {
  const bool set = opt.ep_placement != "round-robin" || !opt.ep_profile.empty() || opt.ep_replicas != 0 ||
                   opt.ep_resident != "all";
  if (set && opt.ep == 0)
    throw Error("generate: --ep-placement / --ep-profile / --ep-replicas / --ep-resident: expected --ep N with them");
  if (opt.ep_placement != "round-robin" && opt.ep_placement != "profile")
    throw Error("generate: --ep-placement: expected round-robin or profile, got '" + opt.ep_placement + "'");
  if (opt.ep_resident != "all" && opt.ep_resident != "held")
    throw Error("generate: --ep-resident: expected all or held, got '" + opt.ep_resident + "'");
  if ((opt.ep_placement == "profile") != !opt.ep_profile.empty())
    throw Error("generate: --ep-profile: expected a file with --ep-placement profile and none otherwise, got " +
                (opt.ep_profile.empty() ? std::string("none") : "'" + opt.ep_profile + "'") + " with --ep-placement " +
                opt.ep_placement);
  if (opt.ep_replicas < 0 || (opt.ep_replicas > 0 && opt.ep_placement != "profile"))
    throw Error("generate: --ep-replicas: expected >= 0, and 0 unless --ep-placement profile, got " +
                std::to_string(opt.ep_replicas));
}

dist::Placement ep_placement(const GenerateCmdOptions& opt, int ranks, int experts) {
  if (opt.ep_placement == "round-robin") return dist::Placement::round_robin(ranks, experts);
  std::ifstream in(opt.ep_profile);
  if (!in) throw Error("generate: --ep-profile: cannot read '" + opt.ep_profile + "'");
  std::stringstream text;
  text << in.rdbuf();
  std::string all = text.str();
  std::replace(all.begin(), all.end(), ',', ' ');
  std::istringstream nums(all);
  std::vector<double> profile;
  std::string tok;
  while (nums >> tok) {
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(tok, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != tok.size() || !std::isfinite(v) || v < 0)
      throw Error("generate: --ep-profile: expected numbers >= 0 in '" + opt.ep_profile + "', got '" + tok + "'");
    profile.push_back(v);
  }
  if (int64_t(profile.size()) != experts)
    throw Error("generate: --ep-profile: expected " + std::to_string(experts) + " numbers (the routed experts) in '" +
                opt.ep_profile + "', got " + std::to_string(profile.size()));
  if (opt.ep_replicas > experts || (opt.ep_replicas > 0 && ranks < 2))
    throw Error("generate: --ep-replicas: expected at most " + std::to_string(experts) +
                " (the routed experts) and 0 with one rank, got " + std::to_string(opt.ep_replicas));
  return dist::Placement::from_profile(ranks, profile, opt.ep_replicas);
}

EpRun generate_ep(dist::Comm& comm, const model::Model& model, std::span<const std::vector<int32_t>> prompts,
                  const model::GenerateOptions& opt, const Context& ctx, const GenerateCmdOptions& flags,
                  const dist::Placement& pl) {
  const int n = comm.size(), me = comm.rank();
  const size_t p = prompts.size();
  std::vector<std::vector<int32_t>> mine;
  std::vector<int64_t> rank_tokens(size_t(n), 0);
  for (size_t i = 0; i < p; ++i) {
    rank_tokens[i % size_t(n)] += int64_t(prompts[i].size());
    if (int(i % size_t(n)) == me) mine.push_back(prompts[i]);
  }
  const int64_t s_max = std::max<int64_t>(1, *std::max_element(rank_tokens.begin(), rank_tokens.end()));
  const bool held = flags.ep_resident == "held";
  dist::EpModel ep(comm, model, s_max, &pl, ctx, held ? dist::PlanPolicy::holders_only : dist::PlanPolicy::any_rank);
  EpRun run;
  run.placement = flags.ep_placement == "profile"
                      ? "profile + " + std::to_string(flags.ep_replicas) + " replicas"
                      : flags.ep_placement;
  run.held_only = held;
  const int64_t mine_res[3] = {ep.resident_expert_bytes(), ep.resident_experts_per_layer(),
                               int64_t(model.routed_expert_bytes())};
  std::vector<int64_t> res(3 * size_t(n));
  comm.all_gather(mine_res, sizeof mine_res, res.data());
  for (size_t r = 0; r < size_t(n); ++r) {
    run.resident_bytes.push_back(res[3 * r]);
    run.resident_experts.push_back(res[3 * r + 1]);
    run.model_bytes.push_back(res[3 * r + 2]);
  }
  model::GenerateResult local;
  if (mine.empty()) {
    ep.generate_idle();
  } else {
    const model::GenerateLockstep lockstep = ep.lockstep();
    local = model::generate(model, mine, opt, ctx, &lockstep);
  }
  // Every prompt's row: [length, finish, ids (max_new_tokens)], filled by its rank, summed over ranks.
  const auto w = size_t(opt.max_new_tokens + 2);
  std::vector<int64_t> table(p * w + 2, 0);
  for (size_t j = 0; j < mine.size(); ++j) {
    int64_t* row = &table[(j * size_t(n) + size_t(me)) * w];
    row[0] = int64_t(local.tokens[j].size());
    row[1] = int64_t(local.finish[j]);
    std::copy(local.tokens[j].begin(), local.tokens[j].end(), row + 2);
  }
  table[p * w] = local.prefill_tokens;
  table[p * w + 1] = local.decode_tokens;
  comm.all_reduce_sum(std::span<int64_t>(table));
  model::GenerateResult& r = run.result;
  for (size_t i = 0; i < p; ++i) {
    const int64_t* row = &table[i * w];
    r.tokens.emplace_back(row + 2, row + 2 + row[0]);
    r.finish.push_back(model::FinishReason(row[1]));
  }
  r.prefill_tokens = table[p * w];
  r.decode_tokens = table[p * w + 1];
  r.prefill_seconds = local.prefill_seconds;  // this rank's wall times (rank 0 reports)
  r.decode_seconds = local.decode_seconds;
  r.cache_bytes = local.cache_bytes;
  run.totals = ep.totals();
  return run;
}

namespace {
double ratio(double sum, int64_t n) { return n > 0 ? sum / double(n) : 0.0; }
}  // namespace

void print_ep_report(std::FILE* out, const dist::Comm& comm, const EpRun& run) {
  const dist::EpTotals& t = run.totals;
  std::string per_rank, resident, bound;
  for (size_t r = 0; r < t.rank_pairs.size(); ++r)
    per_rank += fmt::format("{}r{} {}", r ? ", " : "", r, t.rank_pairs[r]);
  for (size_t r = 0; r < run.resident_bytes.size(); ++r)
    resident += fmt::format("{}r{} {:.2f} MiB ({} experts/layer)", r ? ", " : "", r,
                            double(run.resident_bytes[r]) / (1 << 20), run.resident_experts[r]);
  for (size_t r = 0; r < run.model_bytes.size(); ++r)
    bound += fmt::format("{}r{} {:.2f} MiB", r ? ", " : "", r, double(run.model_bytes[r]) / (1 << 20));
  fmt::print(out, "ep         {} ranks ({}), {} placement, {}\n", comm.size(), comm.name(), run.placement,
             run.held_only ? "each rank keeps and computes only the experts it holds (holders-only plan)"
                           : "every expert resident on every rank (any-rank plan)");
  fmt::print(out, "ep experts routed-expert weights resident per rank: {}\n", resident);
  fmt::print(out, "ep loaded  routed-expert weights bound from the checkpoint per rank (the rest never read): {}\n",
             bound);
  fmt::print(out, "ep load    token-expert pairs computed per rank over {} MoE layer steps: {}\n", t.layer_steps,
             per_rank);
  fmt::print(out, "ep balance slowest rank / mean: {:.3f} before planning (home experts), {:.3f} after\n",
             ratio(t.home_imbalance, t.steps_with_pairs), ratio(t.planned_imbalance, t.steps_with_pairs));
  fmt::print(out, "ep moved   {} of {} pairs ({:.1f}%) off their home rank, in {} replica shares\n", t.moved_pairs,
             t.pairs, t.pairs ? 100.0 * double(t.moved_pairs) / double(t.pairs) : 0.0, t.moved_segments);
  // NOTE: plan includes the wait at the counts all-gather (where a rank waits for the slowest one).
  fmt::print(out, "ep time    rank {}: route {:.3f} s, plan {:.3f} s (with the counts all-gather), dispatch {:.3f} s, "
             "experts {:.3f} s, combine {:.3f} s, tail {:.3f} s\n", comm.rank(), t.route_s, t.plan_s, t.dispatch_s,
             t.expert_s, t.combine_s, t.tail_s);
}

nlohmann::json ep_json(const dist::Comm& comm, const EpRun& run) {
  const dist::EpTotals& t = run.totals;
  return {{"ranks", comm.size()},
          {"transport", comm.name()},
          {"placement", run.placement},
          {"resident", run.held_only ? "held" : "all"},
          {"resident_expert_bytes", run.resident_bytes},
          {"resident_experts_per_layer", run.resident_experts},
          {"loaded_expert_bytes", run.model_bytes},
          {"layer_steps", t.layer_steps},
          {"rank_pairs", t.rank_pairs},
          {"pairs", t.pairs},
          {"moved_pairs", t.moved_pairs},
          {"replica_shares", t.moved_segments},
          {"imbalance_before", ratio(t.home_imbalance, t.steps_with_pairs)},
          {"imbalance_after", ratio(t.planned_imbalance, t.steps_with_pairs)},
          {"seconds", {{"route", t.route_s}, {"plan", t.plan_s}, {"dispatch", t.dispatch_s},
                       {"experts", t.expert_s}, {"combine", t.combine_s}, {"tail", t.tail_s}}}};
}

}  // namespace kimi::cli
