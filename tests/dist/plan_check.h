// tests/dist/plan_check.h: a StepPlan's layouts checked by a simulated all-to-all in one process: every rank's
// dispatch layout against every rank's receive layout (counts agree), each grouped row of its expert, every pair
// (source, slot) computed exactly once, each rank's received rows = its planned load; and Hall's bound.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <utility>
#include <vector>

#include "dist/layout.h"
#include "dist/planner.h"

namespace kimi::testutil {

// ids[r]: rank r's routing [T_r, k]; send_cap / recv_cap: the static buffers' rows.
inline void check_simulated_dispatch(const dist::StepPlan& plan, const std::vector<std::vector<int32_t>>& ids, int k,
                                     int64_t send_cap, int64_t recv_cap) {
  using namespace kimi::dist;
  const int n = plan.ranks;
  std::vector<DispatchLayout> dl;
  for (int r = 0; r < n; ++r) dl.push_back(dispatch_layout(plan, r, ids[size_t(r)], k, send_cap));
  std::vector<std::vector<int>> seen(static_cast<size_t>(n));  // seen[s][slot]: times computed
  for (int r = 0; r < n; ++r) seen[size_t(r)].assign(ids[size_t(r)].size(), 0);
  for (int d = 0; d < n; ++d) {
    const ReceiveLayout rl = receive_layout(plan, d, recv_cap);
    std::vector<std::pair<int, int64_t>> recv(size_t(recv_cap), {-1, -1});
    for (int s = 0; s < n; ++s) {
      ASSERT_EQ(rl.recv_counts[size_t(s)], dl[size_t(s)].send_counts[size_t(d)]) << "source " << s << " dest " << d;
      const DispatchLayout& src = dl[size_t(s)];
      for (int64_t i = 0; i < rl.recv_counts[size_t(s)]; ++i)
        recv[size_t(rl.recv_displs[size_t(s)] + i)] = {s, src.send_slot[size_t(src.send_displs[size_t(d)] + i)]};
    }
    ASSERT_EQ(int64_t(rl.grouped_from.size()), plan.load[size_t(d)]);
    for (size_t i = 0; i < rl.experts.size(); ++i)
      for (int64_t j = rl.expert_rows[i]; j < rl.expert_rows[i + 1]; ++j) {
        const auto [s, slot] = recv[size_t(rl.grouped_from[size_t(j)])];
        ASSERT_GE(s, 0);
        EXPECT_EQ(ids[size_t(s)][size_t(slot)], rl.experts[i]) << "dest " << d << " grouped row " << j;
        ++seen[size_t(s)][size_t(slot)];
      }
  }
  for (int s = 0; s < n; ++s)
    for (size_t i = 0; i < seen[size_t(s)].size(); ++i)
      ASSERT_EQ(seen[size_t(s)][i], 1) << "source " << s << " slot " << i;
}

// The holders-only optimum max load, independently: max over rank subsets Y (N <= 16) of
// ceil(sum of c_e over the experts whose holders all lie in Y / |Y|) (Hall's bound, attained by a flow).
inline int64_t hall_bound(const dist::Placement& pl, const std::vector<int64_t>& c) {
  const int n = pl.ranks;
  std::vector<uint32_t> mask(c.size(), 0);
  for (size_t e = 0; e < c.size(); ++e)
    for (int32_t r : pl.holders[e]) mask[e] |= 1u << r;
  int64_t best = 0;
  for (uint32_t y = 1; y < (1u << n); ++y) {
    int64_t inside = 0;
    for (size_t e = 0; e < c.size(); ++e)
      if ((mask[e] & ~y) == 0) inside += c[e];
    const int64_t size = std::popcount(y);
    best = std::max(best, (inside + size - 1) / size);
  }
  return best;
}

}  // namespace kimi::testutil
