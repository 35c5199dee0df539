// dist/planner.cpp: placement and the per-step balanced plan, any-rank policy (the math and invariants: planner.h,
// docs/ep.md; the holders-only policy: planner_restricted.cpp).
#include "dist/planner.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "dist/planner_detail.h"
#include "kimi/error.h"

namespace kimi::dist {

namespace {

void check_layout(const char* fn, int ranks, int experts) {
  if (experts < 1) throw Error(std::string(fn) + ": argument 'experts': expected >= 1, got " + std::to_string(experts));
  if (ranks < 1 || ranks > experts)
    throw Error(std::string(fn) + ": argument 'ranks': expected 1 <= ranks <= experts (" + std::to_string(experts) +
                "), got " + std::to_string(ranks) + " (every rank must home at least one expert)");
}

// Expected load of each rank: every holder of e gets profile[e] / m_e.
std::vector<double> expected_loads(const Placement& p, std::span<const double> profile) {
  std::vector<double> load(size_t(p.ranks), 0.0);
  for (size_t e = 0; e < p.holders.size(); ++e)
    for (int32_t r : p.holders[e]) load[size_t(r)] += profile[e] / double(p.holders[e].size());
  return load;
}

}  // namespace

Placement Placement::round_robin(int ranks, int experts) {
  check_layout("dist::Placement::round_robin", ranks, experts);
  Placement p{ranks, experts, std::vector<std::vector<int32_t>>(size_t(experts))};
  for (int e = 0; e < experts; ++e) p.holders[size_t(e)] = {int32_t(e % ranks)};
  return p;
}

Placement Placement::from_profile(int ranks, std::span<const double> profile, int replicas) {
  const char* fn = "dist::Placement::from_profile";
  const int experts = int(profile.size());
  check_layout(fn, ranks, experts);
  for (size_t e = 0; e < profile.size(); ++e)
    if (!std::isfinite(profile[e]) || profile[e] < 0)
      throw Error(std::string(fn) + ": argument 'profile[" + std::to_string(e) + "]': expected finite >= 0, got " +
                  std::to_string(profile[e]));
  if (replicas < 0 || replicas > experts || (replicas > 0 && ranks < 2))
    throw Error(std::string(fn) + ": argument 'replicas': expected 0 <= replicas <= experts (" +
                std::to_string(experts) + ") and 0 with one rank, got " + std::to_string(replicas));
  std::vector<int32_t> hot(static_cast<size_t>(experts));
  std::iota(hot.begin(), hot.end(), 0);
  std::stable_sort(hot.begin(), hot.end(),
                   [&](int32_t a, int32_t b) { return profile[size_t(a)] > profile[size_t(b)]; });

  // Homes: LPT (hottest expert to the least loaded rank) under floor/ceil(E/N) experts per rank.
  Placement p{ranks, experts, std::vector<std::vector<int32_t>>(size_t(experts))};
  const int floor_count = experts / ranks, ceil_ranks = experts % ranks;
  std::vector<int> count(size_t(ranks), 0);
  std::vector<double> load(size_t(ranks), 0.0);
  int at_ceil = 0;
  for (int32_t e : hot) {
    int best = -1;
    for (int r = 0; r < ranks; ++r) {
      const bool room = count[size_t(r)] < floor_count || (count[size_t(r)] == floor_count && at_ceil < ceil_ranks);
      if (room && (best < 0 || load[size_t(r)] < load[size_t(best)])) best = r;
    }
    if (count[size_t(best)] == floor_count) ++at_ceil;
    ++count[size_t(best)];
    load[size_t(best)] += profile[size_t(e)];
    p.holders[size_t(e)] = {best};
  }
  // Replicas, one at a time: to the expert of largest expected pairs per holder profile[e] / m_e (ties: hotter,
  // then lower e; experts on every rank are skipped), on the least expected-loaded rank not holding it.
  for (int i = 0; i < replicas; ++i) {
    int32_t e = -1;
    for (int32_t x : hot) {
      const auto m = double(p.holders[size_t(x)].size());
      if (int(m) == ranks) continue;
      if (e < 0 || profile[size_t(x)] / m > profile[size_t(e)] / double(p.holders[size_t(e)].size())) e = x;
    }
    if (e < 0) break;  // every expert on every rank
    const std::vector<double> l = expected_loads(p, profile);
    int best = -1;
    for (int r = 0; r < ranks; ++r) {
      const auto& h = p.holders[size_t(e)];
      if (std::find(h.begin(), h.end(), r) != h.end()) continue;
      if (best < 0 || l[size_t(r)] < l[size_t(best)]) best = r;
    }
    p.holders[size_t(e)].push_back(best);
  }
  return p;
}

std::vector<int32_t> Placement::held_by(int rank) const {
  std::vector<int32_t> out;
  for (size_t e = 0; e < holders.size(); ++e)
    if (std::find(holders[e].begin(), holders[e].end(), rank) != holders[e].end()) out.push_back(int32_t(e));
  return out;
}

StepPlan plan_step(const Placement& placement, std::span<const int64_t> counts, PlanPolicy policy) {
  const char* fn = "dist::plan_step";
  const int n = placement.ranks, e_count = placement.experts;
  const auto sn = size_t(n), se = size_t(e_count);
  if (counts.size() != sn * se)
    throw Error(std::string(fn) + ": argument 'counts': expected " + std::to_string(sn * se) + " values ([" +
                std::to_string(n) + ", " + std::to_string(e_count) + "]), got " + std::to_string(counts.size()));
  StepPlan plan;
  plan.ranks = n;
  plan.experts = e_count;
  plan.counts.assign(counts.begin(), counts.end());
  plan.source_offset.assign(sn * se, 0);
  std::vector<int64_t> c(se, 0);  // c_e
  for (size_t s = 0; s < sn; ++s)
    for (size_t e = 0; e < se; ++e) {
      const int64_t v = counts[s * se + e];
      if (v < 0)
        throw Error(std::string(fn) + ": argument 'counts[" + std::to_string(s) + ", " + std::to_string(e) +
                    "]': expected >= 0, got " + std::to_string(v));
      plan.source_offset[s * se + e] = c[e];
      c[e] += v;
    }
  plan.total_pairs = std::accumulate(c.begin(), c.end(), int64_t(0));

  // Pieces: expert e's range split floor/ceil over its holders; piece (e, j) = [piece_begin, piece_end).
  std::vector<detail::Piece> pieces;
  std::vector<size_t> piece_start(se + 1, 0);
  plan.home_load.assign(sn, 0);
  for (size_t e = 0; e < se; ++e) {
    piece_start[e] = pieces.size();
    const auto& h = placement.holders[e];
    const auto m = int64_t(h.size());
    int64_t b = 0;
    for (int64_t j = 0; j < m; ++j) {
      const int64_t len = c[e] / m + (j < c[e] % m ? 1 : 0);
      pieces.push_back({int32_t(e), h[size_t(j)], b, b + len, 0});
      plan.home_load[size_t(h[size_t(j)])] += len;
      b += len;
    }
  }
  piece_start[se] = pieces.size();
  plan.policy = policy;
  if (policy == PlanPolicy::holders_only) {
    detail::balance_holders_only(placement, c, pieces, piece_start, plan);
    return plan;
  }

  // Targets: the P mod N ranks of largest home load get q + 1.
  const int64_t q = plan.total_pairs / n, rem = plan.total_pairs % n;
  std::vector<int32_t> order(sn);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return plan.home_load[size_t(a)] > plan.home_load[size_t(b)]; });
  std::vector<int64_t> target(sn, q);
  for (int64_t i = 0; i < rem; ++i) target[size_t(order[size_t(i)])] = q + 1;

  // Donations: each overloaded rank gives the tails of its largest pieces.
  std::vector<std::vector<size_t>> by_rank(sn);
  for (size_t i = 0; i < pieces.size(); ++i) by_rank[size_t(pieces[i].rank)].push_back(i);
  std::vector<size_t> donors;  // piece indices, in walk order
  for (size_t r = 0; r < sn; ++r) {
    int64_t x = plan.home_load[r] - target[r];
    if (x <= 0) continue;
    auto& list = by_rank[r];
    std::stable_sort(list.begin(), list.end(), [&](size_t a, size_t b) {
      return pieces[a].end - pieces[a].begin > pieces[b].end - pieces[b].begin;
    });
    for (size_t i : list) {
      if (x == 0) break;
      pieces[i].give = std::min(x, pieces[i].end - pieces[i].begin);
      x -= pieces[i].give;
      donors.push_back(i);
    }
  }
  plan.donor_pieces = int64_t(donors.size());

  // Two-pointer walk: donor tails -> underloaded ranks (rank order). moved[i]: the shares of piece i.
  std::vector<std::vector<Segment>> moved(pieces.size());
  size_t r = 0;
  auto deficit = [&](size_t rr) { return target[rr] - plan.home_load[rr]; };
  std::vector<int64_t> filled(sn, 0);
  for (size_t r2 = 0; r2 < sn; ++r2) plan.underloaded_ranks += deficit(r2) > 0 ? 1 : 0;
  for (size_t i : donors) {
    detail::Piece& pc = pieces[i];
    int64_t pos = pc.end - pc.give;
    while (pos < pc.end) {
      while (r < sn && filled[r] >= deficit(r)) ++r;
      if (r == sn) throw Error(std::string(fn) + ": internal: donations exceed deficits");  // sum x = sum y
      const int64_t take = std::min(pc.end - pos, deficit(r) - filled[r]);
      moved[i].push_back({int32_t(r), pos, pos + take, true});
      filled[r] += take;
      pos += take;
    }
  }

  // Segments per expert, sorted by begin: each piece's kept head, then its moved tail shares.
  plan.seg_start.assign(se + 1, 0);
  for (size_t e = 0; e < se; ++e) {
    plan.seg_start[e] = int64_t(plan.segments.size());
    for (size_t i = piece_start[e]; i < piece_start[e + 1]; ++i) {
      const detail::Piece& pc = pieces[i];
      if (pc.end - pc.give > pc.begin) plan.segments.push_back({pc.rank, pc.begin, pc.end - pc.give, false});
      for (const Segment& s : moved[i]) plan.segments.push_back(s);
    }
  }
  plan.seg_start[se] = int64_t(plan.segments.size());
  plan.load.assign(sn, 0);
  for (const Segment& s : plan.segments) {
    plan.load[size_t(s.rank)] += s.end - s.begin;
    if (s.moved) {
      plan.moved_pairs += s.end - s.begin;
      ++plan.moved_segments;
    }
  }
  return plan;
}

}  // namespace kimi::dist
