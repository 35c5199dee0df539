// tools/kimi/generate_ep.cpp: `kimi generate --ep N` (the contract: generate_ep.h).
#include "generate_ep.h"

#include <fmt/core.h>

#include <algorithm>
#include <string>

namespace kimi::cli {

EpRun generate_ep(dist::Comm& comm, const model::Model& model, std::span<const std::vector<int32_t>> prompts,
                  const model::GenerateOptions& opt, const Context& ctx) {
  const int n = comm.size(), me = comm.rank();
  const size_t p = prompts.size();
  std::vector<std::vector<int32_t>> mine;
  std::vector<int64_t> rank_tokens(size_t(n), 0);
  for (size_t i = 0; i < p; ++i) {
    rank_tokens[i % size_t(n)] += int64_t(prompts[i].size());
    if (int(i % size_t(n)) == me) mine.push_back(prompts[i]);
  }
  const int64_t s_max = std::max<int64_t>(1, *std::max_element(rank_tokens.begin(), rank_tokens.end()));
  dist::EpModel ep(comm, model, s_max, nullptr, ctx);
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
  EpRun run;
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

void print_ep_report(std::FILE* out, const dist::Comm& comm, const dist::EpTotals& t) {
  std::string per_rank;
  for (size_t r = 0; r < t.rank_pairs.size(); ++r)
    per_rank += fmt::format("{}r{} {}", r ? ", " : "", r, t.rank_pairs[r]);
  fmt::print(out, "ep         {} ranks ({}), round-robin placement, every expert resident on every rank\n",
             comm.size(), comm.name());
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

nlohmann::json ep_json(const dist::Comm& comm, const dist::EpTotals& t) {
  return {{"ranks", comm.size()},
          {"transport", comm.name()},
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
