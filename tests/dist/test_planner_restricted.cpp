// tests/dist/test_planner_restricted.cpp: the holders-only step plan (PlanPolicy::holders_only, dist/planner.h)
// against independent references:
//   the optimum max load, by Hall's bound enumerated over rank subsets Y (N <= 16): experts all of whose holders
//   lie in Y must fit in Y, so L* >= ceil(c(experts inside Y) / |Y|), and the max over Y is attained (flow);
//   on tiny cases, an exhaustive search over every assignment of every expert's pairs to its holders: the least max
//   load, and the fewest pairs off their home piece at that load;
// plus the invariants: only holders compute, every pair exactly once (a simulated all-to-all of every rank's
// layouts), per-expert share bound, and with every expert on every rank the any-rank balance ceil(P/N); the flow
// network (dist/flow.h) on known small networks.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

#include "dist/flow.h"
#include "dist/plan_check.h"
#include "dist/planner.h"
#include "dist/routing.h"
#include "expect_error.h"

namespace kimi::dist {
namespace {

using testutil::Routing;

std::vector<int64_t> expert_totals(const std::vector<int64_t>& counts, int n, int e) {
  std::vector<int64_t> c(size_t(e), 0);
  for (int s = 0; s < n; ++s)
    for (int x = 0; x < e; ++x) c[size_t(x)] += counts[size_t(s * e + x)];
  return c;
}

// Piece j of expert e: floor/ceil(c_e / m_e), the larger ones first.
int64_t piece_len(int64_t c, size_t m, size_t j) { return c / int64_t(m) + (int64_t(j) < c % int64_t(m) ? 1 : 0); }

// Exhaustive search: {least max load, fewest moved pairs at that load}.
std::pair<int64_t, int64_t> exhaustive(const Placement& pl, const std::vector<int64_t>& c) {
  std::pair<int64_t, int64_t> best{INT64_MAX, INT64_MAX};
  std::vector<int64_t> load(size_t(pl.ranks), 0);
  std::function<void(size_t, int64_t)> go = [&](size_t e, int64_t moved) {
    if (e == c.size()) {
      const std::pair<int64_t, int64_t> v{*std::max_element(load.begin(), load.end()), moved};
      best = std::min(best, v);
      return;
    }
    const auto& h = pl.holders[e];
    std::vector<int64_t> x(h.size(), 0);
    std::function<void(size_t, int64_t)> split = [&](size_t j, int64_t left) {
      if (j + 1 == h.size()) {
        x[j] = left;
        int64_t mv = 0;
        for (size_t i = 0; i < h.size(); ++i) {
          load[size_t(h[i])] += x[i];
          mv += std::max<int64_t>(0, x[i] - piece_len(c[e], h.size(), i));
        }
        go(e + 1, moved + mv);
        for (size_t i = 0; i < h.size(); ++i) load[size_t(h[i])] -= x[i];
        return;
      }
      for (int64_t v = 0; v <= left; ++v) {
        x[j] = v;
        split(j + 1, left - v);
      }
    };
    split(0, c[e]);
  };
  go(0, 0);
  return best;
}

// The holders-only plan's invariants; returns it.
StepPlan check_restricted(const Placement& pl, const std::vector<int64_t>& counts) {
  const int n = pl.ranks, e = pl.experts;
  const StepPlan plan = plan_step(pl, counts, PlanPolicy::holders_only);
  const std::vector<int64_t> c = expert_totals(counts, n, e);
  const int64_t p = std::accumulate(c.begin(), c.end(), int64_t(0));
  EXPECT_EQ(plan.policy, PlanPolicy::holders_only);
  EXPECT_EQ(plan.total_pairs, p);
  std::vector<int64_t> load(size_t(n), 0), held_pairs(size_t(n), 0);
  int64_t moved = 0, moved_segments = 0;
  for (int x = 0; x < e; ++x) {
    const auto& h = pl.holders[size_t(x)];
    std::vector<int64_t> xr(h.size(), 0);
    int64_t at = 0, expert_moved_segs = 0;
    for (const Segment& sg : plan.expert_segments(x)) {
      EXPECT_EQ(sg.begin, at) << "expert " << x;
      EXPECT_LT(sg.begin, sg.end);
      at = sg.end;
      const auto it = std::find(h.begin(), h.end(), sg.rank);
      EXPECT_NE(it, h.end()) << "expert " << x << " computed on rank " << sg.rank << ", not a holder";
      if (it == h.end()) continue;
      xr[size_t(it - h.begin())] += sg.end - sg.begin;
      load[size_t(sg.rank)] += sg.end - sg.begin;
      expert_moved_segs += sg.moved ? 1 : 0;
    }
    EXPECT_EQ(at, c[size_t(x)]) << "expert " << x;
    int64_t donors = 0, receivers = 0;
    for (size_t j = 0; j < h.size(); ++j) {
      const int64_t len = piece_len(c[size_t(x)], h.size(), j);
      moved += std::max<int64_t>(0, xr[j] - len);
      donors += xr[j] < len ? 1 : 0;
      receivers += xr[j] > len ? 1 : 0;
      held_pairs[size_t(h[j])] += c[size_t(x)];
    }
    if (expert_moved_segs > 0) {
      EXPECT_LE(expert_moved_segs, donors + receivers - 1) << "expert " << x;
    }
    moved_segments += expert_moved_segs;
  }
  EXPECT_EQ(plan.load, load);
  EXPECT_EQ(plan.moved_pairs, moved);
  EXPECT_EQ(plan.moved_segments, moved_segments);
  const int64_t max_load = *std::max_element(load.begin(), load.end());
  EXPECT_LE(max_load, *std::max_element(plan.home_load.begin(), plan.home_load.end()));
  for (int r = 0; r < n; ++r) EXPECT_LE(load[size_t(r)], held_pairs[size_t(r)]) << "rank " << r;
  if (n <= 16) {
    EXPECT_EQ(max_load, testutil::hall_bound(pl, c));
  }
  return plan;
}

// Every rank holds every expert (home e mod N first).
Placement everywhere(int n, int e) {
  Placement pl{n, e, std::vector<std::vector<int32_t>>(size_t(e))};
  for (int x = 0; x < e; ++x)
    for (int j = 0; j < n; ++j) pl.holders[size_t(x)].push_back(int32_t((x + j) % n));
  return pl;
}

// Random holders: 1..max_m distinct ranks in random order.
Placement random_holders(int n, int e, int max_m, std::mt19937_64& rng) {
  Placement pl{n, e, std::vector<std::vector<int32_t>>(size_t(e))};
  std::vector<int32_t> ranks(static_cast<size_t>(n));
  std::iota(ranks.begin(), ranks.end(), 0);
  for (int x = 0; x < e; ++x) {
    std::shuffle(ranks.begin(), ranks.end(), rng);
    const int m = std::uniform_int_distribution<int>(1, std::min(n, max_m))(rng);
    pl.holders[size_t(x)].assign(ranks.begin(), ranks.begin() + m);
  }
  return pl;
}

TEST(PlannerRestricted, ExhaustiveOnTinyCases) {
  std::mt19937_64 rng(77);
  for (int trial = 0; trial < 400; ++trial) {
    const int n = std::uniform_int_distribution<int>(2, 3)(rng);
    const int e = std::uniform_int_distribution<int>(2, trial % 2 ? 3 : 4)(rng);
    const int64_t max_c = e == 4 ? 3 : 5;
    const Placement pl = random_holders(n, e, n, rng);
    std::vector<int64_t> counts(size_t(n * e), 0);
    for (int x = 0; x < e; ++x) {
      const int64_t cx = std::uniform_int_distribution<int64_t>(0, max_c)(rng);
      for (int64_t i = 0; i < cx; ++i) ++counts[size_t(std::uniform_int_distribution<int>(0, n - 1)(rng) * e + x)];
    }
    SCOPED_TRACE("trial " + std::to_string(trial));
    const StepPlan plan = check_restricted(pl, counts);
    const auto [best_load, best_moved] = exhaustive(pl, expert_totals(counts, n, e));
    EXPECT_EQ(*std::max_element(plan.load.begin(), plan.load.end()), best_load);
    EXPECT_EQ(plan.moved_pairs, best_moved);
  }
}

class RestrictedRoutings : public ::testing::TestWithParam<std::tuple<Routing, int, int, int>> {};

TEST_P(RestrictedRoutings, OptimalAndExact) {
  const auto [kind, n, e, k] = GetParam();
  std::mt19937_64 rng(99 + uint64_t(n) * 31 + uint64_t(e) * 7 + uint64_t(k));
  const int64_t s_max = 40;
  std::vector<double> prof(static_cast<size_t>(e));
  for (int i = 0; i < e; ++i) prof[size_t(i)] = 1.0 / (i + 1);
  for (int trial = 0; trial < 4; ++trial) {
    std::vector<std::vector<int32_t>> ids;
    std::vector<int64_t> counts;
    for (int r = 0; r < n; ++r) {
      const int64_t t = trial == 0 ? s_max : std::uniform_int_distribution<int64_t>(0, s_max)(rng);
      ids.push_back(testutil::make_routing(kind, t, k, e, rng, 1.2, n, 0));
      const auto cr = testutil::count_routing(ids.back(), e);
      counts.insert(counts.end(), cr.begin(), cr.end());
    }
    SCOPED_TRACE("trial " + std::to_string(trial));
    std::vector<Placement> placements{Placement::round_robin(n, e), random_holders(n, e, 3, rng)};
    if (n > 1) placements.push_back(Placement::from_profile(n, prof, std::min(e, 2 * n)));
    if (n > 1) placements.push_back(Placement::from_profile(n, prof, 0));
    for (const Placement& pl : placements) {
      const StepPlan plan = check_restricted(pl, counts);
      testutil::check_simulated_dispatch(plan, ids, k, s_max * k, int64_t(n) * s_max * k);
    }
    // Every expert everywhere: the holders-only optimum is the any-rank balance ceil(P/N).
    const StepPlan all = check_restricted(everywhere(n, e), counts);
    const StepPlan any = plan_step(everywhere(n, e), counts);
    EXPECT_EQ(*std::max_element(all.load.begin(), all.load.end()), *std::max_element(any.load.begin(), any.load.end()));
    EXPECT_EQ(*std::max_element(all.load.begin(), all.load.end()), (all.total_pairs + n - 1) / n);
  }
}

INSTANTIATE_TEST_SUITE_P(
    All, RestrictedRoutings,
    ::testing::Values(std::tuple{Routing::uniform, 1, 16, 4}, std::tuple{Routing::uniform, 2, 16, 4},
                      std::tuple{Routing::uniform, 3, 16, 4}, std::tuple{Routing::uniform, 7, 64, 8},
                      std::tuple{Routing::zipf, 4, 16, 4}, std::tuple{Routing::zipf, 16, 128, 8},
                      std::tuple{Routing::zipf, 5, 64, 1}, std::tuple{Routing::same_experts, 4, 16, 4},
                      std::tuple{Routing::same_experts, 8, 64, 1}, std::tuple{Routing::same_experts, 3, 17, 16},
                      std::tuple{Routing::one_rank, 4, 16, 4}, std::tuple{Routing::one_rank, 8, 64, 8},
                      std::tuple{Routing::one_rank, 2, 16, 1}, std::tuple{Routing::zipf, 16, 16, 4}));

TEST(PlannerRestricted, HotExpertWithAndWithoutReplicas) {
  // K = 1, every token of 4 ranks on expert 5 (32 each): one holder computes all 128; two holders 64 each.
  const int n = 4, e = 16;
  std::vector<int64_t> counts(size_t(n * e), 0);
  for (int r = 0; r < n; ++r) counts[size_t(r * e + 5)] = 32;
  const StepPlan one = check_restricted(Placement::round_robin(n, e), counts);
  EXPECT_EQ(one.load, (std::vector<int64_t>{0, 128, 0, 0}));
  EXPECT_EQ(one.moved_pairs, 0);
  Placement two = Placement::round_robin(n, e);
  two.holders[5].push_back(3);
  const StepPlan split = check_restricted(two, counts);
  EXPECT_EQ(split.load, (std::vector<int64_t>{0, 64, 0, 64}));
  EXPECT_EQ(split.moved_pairs, 0);  // the home pieces already split evenly
}

TEST(PlannerRestricted, ChainOfReplicasMovesAlongAPath) {
  // Expert 0 only on rank 0, expert 1 on ranks 0 and 1 (home 0), expert 2 on ranks 1 and 2 (home 1), 6 pairs
  // each: home loads 9, 6, 3; L* = 6 needs rank 0 to give 3 of expert 1 to rank 1 and rank 1 to give 3 of expert 2
  // to rank 2 (a path of two moves: 6 moved pairs).
  Placement pl{3, 3, {{0}, {0, 1}, {1, 2}}};
  const std::vector<int64_t> counts(9, 2);  // [3, 3]: c = {6, 6, 6}
  const StepPlan plan = check_restricted(pl, counts);
  EXPECT_EQ(plan.home_load, (std::vector<int64_t>{9, 6, 3}));
  EXPECT_EQ(plan.load, (std::vector<int64_t>{6, 6, 6}));
  EXPECT_EQ(plan.moved_pairs, 6);
  EXPECT_EQ(plan.moved_segments, 2);
}

TEST(FlowNetwork, MaxFlowAndMinCostOnAKnownNetwork) {
  // s=0 -> a=1 (3), s -> b=2 (3), a -> t=3 (2, cost 1), b -> t (5, cost 3), a -> b (1, cost 1): the max flow 6
  // needs a's third unit through b; the only max flow costs 2*1 + 1*(1 + 3) + 3*3 = 15.
  auto build = [](FlowNetwork& f, std::vector<int>& ids) {
    ids = {f.add_edge(0, 1, 3), f.add_edge(0, 2, 3), f.add_edge(1, 3, 2, 1), f.add_edge(2, 3, 5, 3),
           f.add_edge(1, 2, 1, 1)};
  };
  FlowNetwork a(4), b(4);
  std::vector<int> ia, ib;
  build(a, ia), build(b, ib);
  EXPECT_EQ(a.max_flow(0, 3), 6);
  EXPECT_EQ(b.min_cost_flow(0, 3), (std::pair<int64_t, int64_t>{6, 15}));
  EXPECT_EQ(b.flow(ib[2]), 2);
  EXPECT_EQ(b.flow(ib[3]), 4);
  EXPECT_EQ(b.flow(ib[4]), 1);
  // A cheaper path is used before a dearer one: s -> t directly (cost 5) and s -> m -> t (cost 1 + 1), one unit of
  // demand through the sink's single edge.
  FlowNetwork c(4);
  c.add_edge(0, 2, 1, 5);
  const int cheap = c.add_edge(0, 1, 1, 1);
  c.add_edge(1, 2, 1, 1);
  c.add_edge(2, 3, 1);
  EXPECT_EQ(c.min_cost_flow(0, 3), (std::pair<int64_t, int64_t>{1, 2}));
  EXPECT_EQ(c.flow(cheap), 1);
  EXPECT_KIMI_ERROR(FlowNetwork(1), "dist::FlowNetwork", "'nodes'", "got 1");
  EXPECT_KIMI_ERROR(a.add_edge(0, 4, 1), "dist::FlowNetwork::add_edge", "0 -> 4");
  EXPECT_KIMI_ERROR(a.add_edge(0, 1, -1), "cap -1");
}

TEST(PlannerRestricted, Deterministic) {
  std::mt19937_64 rng(5);
  const Placement pl = random_holders(8, 64, 3, rng);
  std::vector<int64_t> counts(size_t(8 * 64));
  for (auto& v : counts) v = std::uniform_int_distribution<int64_t>(0, 9)(rng);
  const StepPlan a = plan_step(pl, counts, PlanPolicy::holders_only);
  const StepPlan b = plan_step(pl, counts, PlanPolicy::holders_only);
  ASSERT_EQ(a.segments.size(), b.segments.size());
  for (size_t i = 0; i < a.segments.size(); ++i) {
    EXPECT_EQ(a.segments[i].rank, b.segments[i].rank);
    EXPECT_EQ(a.segments[i].begin, b.segments[i].begin);
    EXPECT_EQ(a.segments[i].end, b.segments[i].end);
  }
}

}  // namespace
}  // namespace kimi::dist
