// dist/flow.h: an integer flow network for the restricted EP planner (dist/planner.h, docs/ep.md).
//
// Directed edges (u -> v, capacity c >= 0, cost w); every edge i has its residual reverse i ^ 1 (capacity 0,
// cost -w). Two solvers on the same network, both integer-only and deterministic (adjacency in insertion order):
//   max_flow(s, t)        Dinic: BFS levels + blocking flows; O(V^2 E), far less on the planner's bipartite graphs.
//   min_cost_flow(s, t)   a maximum flow of least total cost (sum over edges of flow * cost), by primal-dual:
//                         Bellman-Ford (queue-based) distances d from s in the residual graph, then Dinic blocking
//                         flows on the admissible edges (residual > 0 and d[v] = d[u] + w), repeated until t is
//                         unreachable. Every augmenting path is a shortest one, so the result is a min-cost max
//                         flow (successive shortest paths) provided the network has no negative-cost cycle with
//                         positive capacity at the start (the planner's costs are 0 and 1).
// flow(i) = the flow on edge i after a solve (= capacity(i) - residual(i)).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace kimi::dist {

class FlowNetwork {
 public:
  explicit FlowNetwork(int nodes);
  // Returns the edge's id (for flow()). cap >= 0.
  int add_edge(int from, int to, int64_t cap, int64_t cost = 0);
  int64_t max_flow(int s, int t);
  // {flow, cost}.
  std::pair<int64_t, int64_t> min_cost_flow(int s, int t);
  int64_t flow(int edge) const { return cap0_[size_t(edge)] - cap_[size_t(edge)]; }
  int nodes() const { return int(adj_.size()); }

 private:
  bool levels(int s, int t, bool admissible);
  int64_t push(int u, int t, int64_t limit, bool admissible);
  bool allowed(int edge, bool admissible) const;
  int64_t blocking_flows(int s, int t, bool admissible);
  std::vector<std::vector<int>> adj_;  // [V] edge ids out of each node, in insertion order
  std::vector<int> to_;                // [2E]
  std::vector<int64_t> cap_, cap0_, cost_;
  std::vector<int> level_;
  std::vector<size_t> next_;           // Dinic's current edge per node
  std::vector<int64_t> dist_;          // min_cost_flow's distances from s
};

}  // namespace kimi::dist
