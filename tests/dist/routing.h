// tests/dist/routing.h: synthetic routings for the EP tests: ids [T, K] of distinct experts per token, drawn
// uniformly, from a Zipf law over experts, or adversarially (every token on the same K experts, or only on
// experts homed on one rank).
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace kimi::testutil {

enum class Routing { uniform, zipf, same_experts, one_rank };

// Rank-local routing of t tokens, k distinct experts each out of e. zipf_s: the exponent (weights 1/(i+1)^s).
// one_rank: experts homed on rank `home` under round-robin over n ranks (needs k <= the experts it homes).
inline std::vector<int32_t> make_routing(Routing kind, int64_t t, int k, int e, std::mt19937_64& rng,
                                         double zipf_s = 1.2, int n = 1, int home = 0) {
  std::vector<int32_t> ids;
  ids.reserve(size_t(t * k));
  std::vector<double> w(static_cast<size_t>(e));
  for (int i = 0; i < e; ++i) w[size_t(i)] = kind == Routing::zipf ? 1.0 / std::pow(double(i + 1), zipf_s) : 1.0;
  std::discrete_distribution<int32_t> draw(w.begin(), w.end());
  std::vector<int32_t> pool;
  for (int i = 0; i < e; ++i)
    if (kind != Routing::one_rank || i % n == home) pool.push_back(i);
  for (int64_t tok = 0; tok < t; ++tok) {
    std::vector<char> used(size_t(e), 0);
    for (int j = 0; j < k; ++j) {
      int32_t pick = 0;
      if (kind == Routing::same_experts) {
        pick = int32_t(j);
      } else if (kind == Routing::one_rank) {
        std::uniform_int_distribution<size_t> u(0, pool.size() - 1);
        do pick = pool[u(rng)]; while (used[size_t(pick)]);
      } else {
        do pick = draw(rng); while (used[size_t(pick)]);
      }
      used[size_t(pick)] = 1;
      ids.push_back(pick);
    }
  }
  return ids;
}

// counts [E] of a routing.
inline std::vector<int64_t> count_routing(const std::vector<int32_t>& ids, int e) {
  std::vector<int64_t> c(size_t(e), 0);
  for (int32_t i : ids) ++c[size_t(i)];
  return c;
}

}  // namespace kimi::testutil
