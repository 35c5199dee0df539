// tests/dist/test_planner.cpp: the planner's invariants (dist/planner.h) and the dispatch / receive layouts
// (dist/layout.h), simulated in one process: N ranks' routings, one plan, every rank's layouts, the all-to-all
// done by hand. Checked for uniform, Zipf and adversarial routings:
//   loads in {floor(P/N), ceil(P/N)}; every pair computed exactly once on the rank its segment names; moved
//   pairs = the independent minimum; moved segments <= donor pieces + underloaded ranks - 1; buffers <= S*K;
//   received rows grouped by expert, each group's rows all of that expert.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

#include "dist/layout.h"
#include "dist/planner.h"
#include "dist/plan_check.h"
#include "dist/routing.h"
#include "expect_error.h"

namespace kimi::dist {
namespace {

using testutil::Routing;

// The fewest pairs any floor/ceil assignment moves off their holders, computed directly: the P mod N heaviest
// home loads get ceil.
int64_t min_moves(std::vector<int64_t> home, int64_t p) {
  const auto n = int64_t(home.size());
  std::sort(home.begin(), home.end(), std::greater<>());
  int64_t moved = 0;
  for (int64_t r = 0; r < n; ++r) moved += std::max<int64_t>(0, home[size_t(r)] - (p / n + (r < p % n ? 1 : 0)));
  return moved;
}

// Plans one step over per-rank routings and checks every invariant, including a simulated dispatch.
void check_step(const Placement& pl, const std::vector<std::vector<int32_t>>& ids, int k, int64_t s_max) {
  const int n = pl.ranks, e = pl.experts;
  std::vector<int64_t> counts;
  for (const auto& r : ids) {
    const auto c = testutil::count_routing(r, e);
    counts.insert(counts.end(), c.begin(), c.end());
  }
  const StepPlan plan = plan_step(pl, counts);
  const int64_t p = std::accumulate(counts.begin(), counts.end(), int64_t(0));
  ASSERT_EQ(plan.total_pairs, p);
  for (int r = 0; r < n; ++r) {
    EXPECT_GE(plan.load[size_t(r)], p / n) << "rank " << r;
    EXPECT_LE(plan.load[size_t(r)], (p + n - 1) / n) << "rank " << r;
    EXPECT_LE(plan.load[size_t(r)], s_max * k) << "rank " << r;
  }
  EXPECT_EQ(plan.moved_pairs, min_moves(plan.home_load, p));
  if (plan.moved_segments > 0) {
    EXPECT_LE(plan.moved_segments, plan.donor_pieces + plan.underloaded_ranks - 1);
  }
  // Segments tile [0, c_e); kept segments sit on a holder.
  for (int x = 0; x < e; ++x) {
    int64_t at = 0, c = 0;
    for (int s = 0; s < n; ++s) c += counts[size_t(s * e + x)];
    for (const Segment& sg : plan.expert_segments(x)) {
      EXPECT_EQ(sg.begin, at);
      EXPECT_LT(sg.begin, sg.end);
      at = sg.end;
      const auto& h = pl.holders[size_t(x)];
      if (!sg.moved) {
        EXPECT_NE(std::find(h.begin(), h.end(), sg.rank), h.end());
      }
    }
    EXPECT_EQ(at, c) << "expert " << x;
  }

  testutil::check_simulated_dispatch(plan, ids, k, s_max * k, s_max * k);
}

class PlannerRoutings : public ::testing::TestWithParam<std::tuple<Routing, int, int, int>> {};

TEST_P(PlannerRoutings, InvariantsHold) {
  const auto [kind, n, e, k] = GetParam();
  std::mt19937_64 rng(1234 + uint64_t(n) * 31 + uint64_t(e) * 7 + uint64_t(k));
  const int64_t s_max = 40;
  for (int trial = 0; trial < 6; ++trial) {
    std::vector<std::vector<int32_t>> ids;
    for (int r = 0; r < n; ++r) {
      const int64_t t = trial == 0 ? s_max : std::uniform_int_distribution<int64_t>(0, s_max)(rng);
      ids.push_back(testutil::make_routing(kind, t, k, e, rng, 1.2, n, 0));
    }
    SCOPED_TRACE("trial " + std::to_string(trial));
    check_step(Placement::round_robin(n, e), ids, k, s_max);
    // A profile placement from a Zipf-like profile with replicas of the hottest experts.
    if (n > 1) {
      std::vector<double> prof(static_cast<size_t>(e));
      for (int i = 0; i < e; ++i) prof[size_t(i)] = 1.0 / (i + 1);
      check_step(Placement::from_profile(n, prof, std::min(e, 2 * n)), ids, k, s_max);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    All, PlannerRoutings,
    ::testing::Values(std::tuple{Routing::uniform, 1, 16, 4}, std::tuple{Routing::uniform, 2, 16, 4},
                      std::tuple{Routing::uniform, 3, 16, 4}, std::tuple{Routing::uniform, 7, 64, 8},
                      std::tuple{Routing::zipf, 4, 16, 4}, std::tuple{Routing::zipf, 16, 128, 8},
                      std::tuple{Routing::zipf, 5, 64, 1}, std::tuple{Routing::same_experts, 4, 16, 4},
                      std::tuple{Routing::same_experts, 8, 64, 1}, std::tuple{Routing::same_experts, 3, 17, 16},
                      std::tuple{Routing::one_rank, 4, 16, 4}, std::tuple{Routing::one_rank, 8, 64, 8},
                      std::tuple{Routing::one_rank, 2, 16, 1}, std::tuple{Routing::zipf, 16, 16, 4},
                      std::tuple{Routing::same_experts, 16, 16, 1}));

TEST(Planner, AllPairsOnOneExpertSplitEvenly) {
  // K = 1, every token of every rank on expert 5: P = N*S pairs, each rank computes exactly S.
  const int n = 4, e = 16;
  const std::vector<std::vector<int32_t>> ids(size_t(n), std::vector<int32_t>(32, 5));
  check_step(Placement::round_robin(n, e), ids, 1, 32);
  std::vector<int64_t> counts(size_t(n * e), 0);
  for (int r = 0; r < n; ++r) counts[size_t(r * e + 5)] = 32;
  const StepPlan plan = plan_step(Placement::round_robin(n, e), counts);
  EXPECT_EQ(plan.load, (std::vector<int64_t>{32, 32, 32, 32}));
  EXPECT_EQ(plan.moved_pairs, 96);
  EXPECT_EQ(plan.moved_segments, 3);  // one donor piece, three underloaded ranks
}

TEST(Planner, BalancedRoutingMovesNothing) {
  const int n = 4, e = 8;
  std::vector<int64_t> counts(size_t(n * e), 3);
  const StepPlan plan = plan_step(Placement::round_robin(n, e), counts);
  EXPECT_EQ(plan.moved_pairs, 0);
  EXPECT_EQ(plan.moved_segments, 0);
  EXPECT_EQ(plan.load, (std::vector<int64_t>{24, 24, 24, 24}));
}

TEST(Planner, EmptyStep) {
  const StepPlan plan = plan_step(Placement::round_robin(3, 6), std::vector<int64_t>(18, 0));
  EXPECT_EQ(plan.load, (std::vector<int64_t>{0, 0, 0}));
  EXPECT_TRUE(plan.segments.empty());
}

TEST(Placement, RoundRobinAndProfile) {
  const Placement rr = Placement::round_robin(3, 7);
  EXPECT_EQ(rr.held_by(0), (std::vector<int32_t>{0, 3, 6}));
  EXPECT_EQ(rr.held_by(2), (std::vector<int32_t>{2, 5}));
  // Profile: 8 experts, 2 ranks: homes 4 each, loads balanced by LPT; the hottest expert gets a replica.
  const std::vector<double> prof{8, 1, 1, 1, 7, 1, 1, 1};
  const Placement p = Placement::from_profile(2, prof, 1);
  EXPECT_EQ(p.held_by(0).size() + p.held_by(1).size(), 9u);
  EXPECT_EQ(p.holders[0].size(), 2u);
  EXPECT_NE(p.holders[0][0], p.holders[4][0]);  // the two hot experts on different homes
  // Water-filling: expert 0 expects 12 pairs per holder, the others 1: the first 3 replicas all go to it (12 -> 6 ->
  // 4 -> 3 pairs per holder); it is then on every rank, so the 4th goes to one of the others.
  const std::vector<double> hot{12, 1, 1, 1, 1, 1, 1, 1};
  const Placement w = Placement::from_profile(4, hot, 4);
  EXPECT_EQ(w.holders[0].size(), 4u);
  size_t extra = 0;
  for (int e = 1; e < 8; ++e) extra += w.holders[size_t(e)].size() - 1;
  EXPECT_EQ(extra, 1u);
  std::vector<int32_t> h0 = w.holders[0];
  std::sort(h0.begin(), h0.end());
  EXPECT_EQ(h0, (std::vector<int32_t>{0, 1, 2, 3}));
}

TEST(Placement, BadLayoutsAreClearErrors) {
  EXPECT_KIMI_ERROR(Placement::round_robin(17, 16), "dist::Placement::round_robin", "'ranks'",
                    "1 <= ranks <= experts (16)", "got 17");
  EXPECT_KIMI_ERROR(Placement::round_robin(0, 16), "'ranks'", "got 0");
  EXPECT_KIMI_ERROR(Placement::from_profile(2, std::vector<double>{1, -1}, 0), "'profile[1]'", ">= 0");
  EXPECT_KIMI_ERROR(Placement::from_profile(1, std::vector<double>{1, 1}, 1), "'replicas'", "got 1");
  EXPECT_KIMI_ERROR(plan_step(Placement::round_robin(2, 4), std::vector<int64_t>(7, 0)), "dist::plan_step",
                    "'counts'", "expected 8 values", "got 7");
  EXPECT_KIMI_ERROR(plan_step(Placement::round_robin(2, 4), std::vector<int64_t>{0, 0, 0, 0, 0, -1, 0, 0}),
                    "'counts[1, 1]'", "got -1");
}

TEST(Layout, ViolationsAreClearErrors) {
  const Placement pl = Placement::round_robin(2, 4);
  const StepPlan plan = plan_step(pl, std::vector<int64_t>{2, 0, 0, 0, 0, 0, 0, 0});
  const std::vector<int32_t> ids{0, 0};
  EXPECT_KIMI_ERROR(dispatch_layout(plan, 0, ids, 1, 1), "dist::dispatch_layout", "static buffer's 1 rows", "got 2");
  EXPECT_KIMI_ERROR(dispatch_layout(plan, 1, ids, 1, 8), "expert 0 has 2 pairs", "counts[1, 0] is 0");
  EXPECT_KIMI_ERROR(dispatch_layout(plan, 0, std::vector<int32_t>{0, 4}, 1, 8), "'ids[1]'", "[0, 4)", "got 4");
  EXPECT_KIMI_ERROR(dispatch_layout(plan, 2, ids, 1, 8), "'rank'", "got 2");
}

}  // namespace
}  // namespace kimi::dist
