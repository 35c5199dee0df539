// dist/flow.cpp: Dinic max flow and primal-dual min-cost max flow (the math: flow.h).
#include "dist/flow.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <string>

#include "kimi/error.h"

namespace kimi::dist {

namespace {
constexpr int64_t kInf = std::numeric_limits<int64_t>::max() / 4;
}  // namespace

FlowNetwork::FlowNetwork(int nodes) {
  if (nodes < 2) throw Error("dist::FlowNetwork: argument 'nodes': expected >= 2, got " + std::to_string(nodes));
  adj_.resize(size_t(nodes));
}

int FlowNetwork::add_edge(int from, int to, int64_t cap, int64_t cost) {
  const int v = nodes();
  if (from < 0 || from >= v || to < 0 || to >= v || cap < 0)
    throw Error("dist::FlowNetwork::add_edge: expected 0 <= from, to < " + std::to_string(v) + " and cap >= 0, got " +
                std::to_string(from) + " -> " + std::to_string(to) + " cap " + std::to_string(cap));
  const int id = int(to_.size());
  to_.push_back(to), cap_.push_back(cap), cap0_.push_back(cap), cost_.push_back(cost);
  to_.push_back(from), cap_.push_back(0), cap0_.push_back(0), cost_.push_back(-cost);
  adj_[size_t(from)].push_back(id);
  adj_[size_t(to)].push_back(id + 1);
  return id;
}

bool FlowNetwork::allowed(int edge, bool admissible) const {
  const auto i = size_t(edge);
  if (cap_[i] <= 0) return false;
  if (!admissible) return true;
  const auto u = size_t(to_[i ^ 1]), v = size_t(to_[i]);
  return dist_[u] < kInf && dist_[v] == dist_[u] + cost_[i];
}

bool FlowNetwork::levels(int s, int t, bool admissible) {
  level_.assign(adj_.size(), -1);
  std::deque<int> q{s};
  level_[size_t(s)] = 0;
  while (!q.empty()) {
    const int u = q.front();
    q.pop_front();
    for (int i : adj_[size_t(u)]) {
      const int v = to_[size_t(i)];
      if (level_[size_t(v)] < 0 && allowed(i, admissible)) {
        level_[size_t(v)] = level_[size_t(u)] + 1;
        q.push_back(v);
      }
    }
  }
  return level_[size_t(t)] >= 0;
}

int64_t FlowNetwork::push(int u, int t, int64_t limit, bool admissible) {
  if (u == t) return limit;
  auto& it = next_[size_t(u)];
  for (; it < adj_[size_t(u)].size(); ++it) {
    const int i = adj_[size_t(u)][it];
    const int v = to_[size_t(i)];
    if (level_[size_t(v)] != level_[size_t(u)] + 1 || !allowed(i, admissible)) continue;
    const int64_t got = push(v, t, std::min(limit, cap_[size_t(i)]), admissible);
    if (got > 0) {
      cap_[size_t(i)] -= got;
      cap_[size_t(i) ^ 1] += got;
      return got;
    }
  }
  return 0;
}

int64_t FlowNetwork::blocking_flows(int s, int t, bool admissible) {
  int64_t total = 0;
  while (levels(s, t, admissible)) {
    next_.assign(adj_.size(), 0);
    while (const int64_t f = push(s, t, kInf, admissible)) total += f;
  }
  return total;
}

int64_t FlowNetwork::max_flow(int s, int t) { return blocking_flows(s, t, false); }

std::pair<int64_t, int64_t> FlowNetwork::min_cost_flow(int s, int t) {
  int64_t flow = 0;
  const auto v = adj_.size();
  for (;;) {
    // Queue-based Bellman-Ford from s over the residual graph (negative reverse costs, no negative cycles).
    dist_.assign(v, kInf);
    std::vector<char> queued(v, 0);
    std::deque<int> q{s};
    dist_[size_t(s)] = 0;
    queued[size_t(s)] = 1;
    while (!q.empty()) {
      const int u = q.front();
      q.pop_front();
      queued[size_t(u)] = 0;
      for (int i : adj_[size_t(u)]) {
        const auto w = size_t(to_[size_t(i)]);
        if (cap_[size_t(i)] > 0 && dist_[size_t(u)] + cost_[size_t(i)] < dist_[w]) {
          dist_[w] = dist_[size_t(u)] + cost_[size_t(i)];
          if (!queued[w]) queued[w] = 1, q.push_back(int(w));
        }
      }
    }
    if (dist_[size_t(t)] >= kInf) break;
    const int64_t f = blocking_flows(s, t, true);
    if (f == 0) throw Error("dist::FlowNetwork::min_cost_flow: internal: a shortest path carried no flow");
    flow += f;
  }
  int64_t cost = 0;
  for (size_t i = 0; i < to_.size(); i += 2) cost += (cap0_[i] - cap_[i]) * cost_[i];
  return {flow, cost};
}

}  // namespace kimi::dist
