// dist/planner_restricted.cpp: the holders-only step plan (the math and invariants: planner.h; docs/ep.md).
#include <algorithm>
#include <numeric>
#include <string>

#include "dist/flow.h"
#include "dist/planner_detail.h"
#include "kimi/error.h"

namespace kimi::dist::detail {

namespace {

// Nodes of both networks: source, sink, experts, ranks.
constexpr int kSource = 0, kSink = 1;
int expert_node(size_t e) { return 2 + int(e); }
int rank_node(int experts, int32_t r) { return 2 + experts + r; }

// Whether every rank computing at most `cap` pairs can take all P pairs with expert e only on holders[e].
bool feasible(const Placement& pl, std::span<const int64_t> c, int64_t total, int64_t cap) {
  FlowNetwork net(2 + pl.experts + pl.ranks);
  for (size_t e = 0; e < c.size(); ++e) {
    if (c[e] == 0) continue;
    net.add_edge(kSource, expert_node(e), c[e]);
    for (int32_t r : pl.holders[e]) net.add_edge(expert_node(e), rank_node(pl.experts, r), c[e]);
  }
  for (int32_t r = 0; r < pl.ranks; ++r) net.add_edge(rank_node(pl.experts, r), kSink, cap);
  return net.max_flow(kSource, kSink) == total;
}

}  // namespace

void balance_holders_only(const Placement& pl, std::span<const int64_t> c, std::span<const Piece> pieces,
                          std::span<const size_t> piece_start, StepPlan& plan) {
  const char* fn = "dist::plan_step (holders_only)";
  const int n = pl.ranks;
  const auto sn = size_t(n), se = c.size();
  const int64_t total = plan.total_pairs;

  // 1. L* by binary search: home loads are feasible (hi); no plan beats ceil(P/N) or ceil(c_e / m_e) (lo).
  int64_t lo = (total + n - 1) / n, hi = *std::max_element(plan.home_load.begin(), plan.home_load.end());
  for (size_t e = 0; e < se; ++e) {
    const auto m = int64_t(pl.holders[e].size());
    lo = std::max(lo, (c[e] + m - 1) / m);
  }
  // With enough replicas the lower bound is usually reached: try it first (one max flow instead of log2(hi - lo)).
  if (lo < hi) {
    if (feasible(pl, c, total, lo))
      hi = lo;
    else
      ++lo;
  }
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (feasible(pl, c, total, mid))
      hi = mid;
    else
      lo = mid + 1;
  }
  const int64_t cap = lo;

  // 2. Fewest moved pairs at L*: min-cost flow from the overloaded ranks' excess to the spare room.
  FlowNetwork net(2 + pl.experts + n);
  int64_t excess = 0;
  for (int32_t r = 0; r < n; ++r) {
    const int64_t home = plan.home_load[size_t(r)];
    if (home > cap) net.add_edge(kSource, rank_node(pl.experts, r), home - cap), excess += home - cap;
    if (home < cap) net.add_edge(rank_node(pl.experts, r), kSink, cap - home);
  }
  std::vector<int> give(pieces.size(), -1), take(pieces.size(), -1);  // edge ids per piece: r -> e, e -> r
  for (size_t e = 0; e < se; ++e) {
    if (c[e] == 0 || pl.holders[e].size() < 2) continue;
    for (size_t i = piece_start[e]; i < piece_start[e + 1]; ++i) {
      const Piece& pc = pieces[i];
      const int r = rank_node(pl.experts, pc.rank);
      if (pc.end > pc.begin) give[i] = net.add_edge(r, expert_node(e), pc.end - pc.begin, 0);
      take[i] = net.add_edge(expert_node(e), r, c[e], 1);
    }
  }
  const auto [flow, cost] = net.min_cost_flow(kSource, kSink);
  if (flow != excess)
    throw Error(std::string(fn) + ": internal: the move flow carried " + std::to_string(flow) + " of " +
                std::to_string(excess) + " excess pairs at L* = " + std::to_string(cap));

  // 3. Segments per expert: kept heads, then piece tails (holder order) to the receivers (holder order).
  plan.seg_start.assign(se + 1, 0);
  plan.segments.clear();
  plan.donor_pieces = 0;
  std::vector<Segment> segs;
  for (size_t e = 0; e < se; ++e) {
    plan.seg_start[e] = int64_t(plan.segments.size());
    const size_t p0 = piece_start[e], p1 = piece_start[e + 1];
    std::vector<int64_t> x(p1 - p0);  // pairs each holder computes
    for (size_t i = p0; i < p1; ++i) {
      const Piece& pc = pieces[i];
      x[i - p0] = pc.end - pc.begin - (give[i] >= 0 ? net.flow(give[i]) : 0) + (take[i] >= 0 ? net.flow(take[i]) : 0);
    }
    segs.clear();
    for (size_t i = p0; i < p1; ++i) {
      const Piece& pc = pieces[i];
      const int64_t keep = std::min(x[i - p0], pc.end - pc.begin);
      if (keep > 0) segs.push_back({pc.rank, pc.begin, pc.begin + keep, false});
    }
    size_t to = p0;
    int64_t filled = 0;  // pairs the current receiver (piece `to`) got beyond its piece
    for (size_t i = p0; i < p1; ++i) {
      const Piece& pc = pieces[i];
      int64_t pos = pc.begin + x[i - p0];
      if (pos >= pc.end) continue;
      ++plan.donor_pieces;
      while (pos < pc.end) {
        while (to < p1 && filled >= x[to - p0] - (pieces[to].end - pieces[to].begin)) ++to, filled = 0;
        if (to == p1) throw Error(std::string(fn) + ": internal: expert " + std::to_string(e) + " gives more pairs "
                                  "than its holders take");
        const int64_t need = x[to - p0] - (pieces[to].end - pieces[to].begin) - filled;
        const int64_t got = std::min(pc.end - pos, need);
        segs.push_back({pieces[to].rank, pos, pos + got, true});
        filled += got;
        pos += got;
      }
    }
    std::sort(segs.begin(), segs.end(), [](const Segment& a, const Segment& b) { return a.begin < b.begin; });
    plan.segments.insert(plan.segments.end(), segs.begin(), segs.end());
  }
  plan.seg_start[se] = int64_t(plan.segments.size());
  plan.load.assign(sn, 0);
  plan.moved_pairs = plan.moved_segments = 0;
  for (const Segment& s : plan.segments) {
    plan.load[size_t(s.rank)] += s.end - s.begin;
    if (s.moved) plan.moved_pairs += s.end - s.begin, ++plan.moved_segments;
  }
  plan.underloaded_ranks = 0;
  for (size_t r = 0; r < sn; ++r) plan.underloaded_ranks += plan.load[r] > plan.home_load[r] ? 1 : 0;
  if (plan.moved_pairs != cost)
    throw Error(std::string(fn) + ": internal: " + std::to_string(plan.moved_pairs) + " moved pairs, the flow's cost "
                "is " + std::to_string(cost));
}

}  // namespace kimi::dist::detail
