// dist/planner.h: expert placement (load time) and the per-step balanced plan of expert parallelism
// (docs/ep.md, SPEC 9).
//
// Placement. N ranks, E routed experts. Expert e has holders[e] (m_e >= 1 distinct ranks, holders[e][0] = its
// home). Round-robin: holders[e] = {e mod N}. From a routing profile (expected pairs per expert): E home slots
// dealt so that every rank homes floor/ceil(E/N) experts and the expected home loads are balanced (LPT), plus R
// replica slots dealt one at a time by water-filling: to the expert of largest expected pairs per holder
// profile[e] / m_e (so a very hot expert may get several), on the rank of least expected load not holding it.
//
// Step plan. counts[s, e] = pairs (token, slot) of expert e routed on source rank s (one all-gather of [E] per
// rank), c_e = sum_s counts[s, e], P = sum_e c_e. Expert e's pairs are ordered globally by (source rank, local
// order); that order is split into m_e pieces of floor/ceil(c_e / m_e) pairs, piece j belonging to holders[e][j].
// L_r = the pairs of r's pieces (its home load). Targets: q = floor(P/N), the P mod N ranks of largest L_r (ties:
// lower rank) get q+1, the others q. Excess x_r = max(0, L_r - t_r), deficit y_r = max(0, t_r - L_r).
// Overloaded ranks give the tail of their largest pieces (largest first, ties lower expert) until x_r is
// given; a two-pointer walk fills the underloaded ranks (rank order) from that donation list.
//
// Invariants (tests/dist/test_planner.cpp checks them for random, Zipf and adversarial routings):
//   load[r] in {floor(P/N), ceil(P/N)}                                   (optimal balance for any routing)
//   each expert's segments cover [0, c_e) exactly once, sorted by begin  (every pair assigned exactly once)
//   moved_pairs = sum_r x_r = the minimum over all floor/ceil assignments (giving q+1 to the largest L_r)
//   moved segments <= donor pieces + underloaded ranks - 1               (each walk step exhausts one side)
//   if every source has <= S*K pairs then load[r] <= ceil(P/N) <= S*K    (static buffers cannot overflow)
// The plan is a pure function of (placement, counts): every rank computes the same plan with no negotiation.
// Any rank may compute any expert: the CPU ranks keep every expert resident (docs/ep.md: weights).
//
// Holders-only policy (PlanPolicy::holders_only; planner_restricted.cpp): expert e's pairs are computed on
// holders[e] only (each rank needs only its held experts' weights: a fixed replica set chosen at load). Same pieces
// and home loads; the assignment x[e, r] >= 0 (r in holders[e], sum_r x[e, r] = c_e) minimises, in order,
//   1. L = max_r load[r]: L* = the least L for which the bipartite network source -c_e-> e -> holders -L-> sink
//      carries P (binary search over [max(ceil(P/N), max_e ceil(c_e / m_e)), max_r L_r], Dinic max flow). By
//      max-flow/min-cut (Hall), L* = max over expert sets X of ceil(c(X) / |holders(X)|): the optimum.
//   2. moved pairs sum_{e, r} max(0, x[e, r] - piece[e, r]) at L*: a min-cost flow that starts from the home
//      assignment: source -(L_r - L*)+-> r -piece[e, r], cost 0-> e -c_e, cost 1-> r' -(L* - L_r')+-> sink;
//      each unit on an e -> r' edge is one pair computed off its piece (a flow of least cost never sends e's pairs
//      both into and out of one rank: that cycle has cost 1 > 0).
// Segments: holder j keeps the head min(x, piece) of its piece; the tails of the pieces with x < piece go, in
// holder order, to the holders with x > piece (a two-pointer walk per expert). Invariants (tests/dist):
//   max load = L* (checked against the Hall bound by enumeration and against exhaustive search on small cases)
//   every segment's rank is in holders[e]; segments cover [0, c_e) exactly once, sorted by begin
//   moved pairs = the exhaustive minimum at L*; per expert, moved segments <= donor pieces + receivers - 1
//   load[r] <= sum of c_e over r's experts <= N*S*|held(r)| and <= N*S*K  (EpMoe's receive buffers)
// donor_pieces: pieces that gave pairs; underloaded_ranks: ranks that computed more than their home load.
// Integer arithmetic only, adjacency in a fixed order: every rank computes the identical plan.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kimi::dist {

struct Placement {
  int ranks = 0, experts = 0;
  std::vector<std::vector<int32_t>> holders;  // [E] distinct ranks; holders[e][0] = home

  // holders[e] = {e mod N}. Requires 1 <= ranks <= experts.
  static Placement round_robin(int ranks, int experts);
  // Balanced homes from expected pairs per expert (profile [E], finite, >= 0) + `replicas` extra holders dealt by
  // water-filling (each expert at most ranks - 1 replicas; fewer in all when every expert is on every rank).
  // Requires 1 <= ranks <= experts and replicas <= experts.
  static Placement from_profile(int ranks, std::span<const double> profile, int replicas);

  // The experts rank r holds (ascending).
  std::vector<int32_t> held_by(int rank) const;
};

// A contiguous range [begin, end) of expert e's global pair order computed on `rank`.
struct Segment {
  int32_t rank = 0;
  int64_t begin = 0, end = 0;
  bool moved = false;  // computed off the piece's holder (a replica share)
};

enum class PlanPolicy {
  any_rank,      // any rank computes any expert's share: loads floor/ceil(P/N) (every expert on every rank)
  holders_only,  // expert e only on holders[e]: max load = the restricted optimum L* (resident experts only)
};

struct StepPlan {
  int ranks = 0, experts = 0;
  PlanPolicy policy = PlanPolicy::any_rank;
  std::vector<int64_t> counts;         // [N, E] counts[s * E + e]
  std::vector<int64_t> source_offset;  // [N, E] first global index of source s's pairs of expert e
  std::vector<int64_t> seg_start;      // [E + 1] expert e's segments are segments[seg_start[e], seg_start[e+1])
  std::vector<Segment> segments;
  std::vector<int64_t> home_load;      // [N] L_r
  std::vector<int64_t> load;           // [N] pairs computed by each rank
  int64_t total_pairs = 0;             // P
  int64_t moved_pairs = 0;             // sum of moved segment lengths
  int64_t moved_segments = 0;          // replica shares this step
  int64_t donor_pieces = 0;            // pieces that gave pairs away
  int64_t underloaded_ranks = 0;       // ranks with y_r > 0

  std::span<const Segment> expert_segments(int e) const {
    return {segments.data() + seg_start[size_t(e)], size_t(seg_start[size_t(e) + 1] - seg_start[size_t(e)])};
  }
};

// counts [N, E] (all >= 0). Throws kimi::Error on shape or value errors.
StepPlan plan_step(const Placement& placement, std::span<const int64_t> counts,
                   PlanPolicy policy = PlanPolicy::any_rank);

}  // namespace kimi::dist
