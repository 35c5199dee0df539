// tests/dist/test_device_layout.cpp: the CUDA EP step's packed layout tables (dist/device_layout.h), checked on the
// CPU by simulating one step of N ranks with the tables alone: every row carries (source rank, token), dispatch is
// send[i] = z[send_tok[i]] and a simulated all_to_all_v, the grouped rows recv[grouped_from[j]] are "computed" by
// the resident expert that off assigns them (output = (source, token, expert)), outputs go back to the received
// order through ungroup and to the source by the swapped all_to_all_v; then back[comb_row[t*K + r]] must be token
// t's output of its r-th smallest expert, and comb_slot[t*K + r] the slot routed to that expert. Uniform, Zipf and
// same-experts routings, round-robin and profile placements, any_rank and holders_only, N in {1, 2, 3, 5}.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <random>
#include <vector>

#include "dist/device_layout.h"
#include "dist/routing.h"
#include "expect_error.h"

namespace kimi::dist {
namespace {

using Row = std::array<int64_t, 3>;  // (source rank, token, expert); expert -1 before the experts ran

// Moves every rank's rows: block d of rank s (counts[s][d] rows at displs[s][d]) to rank d at rdispls[d][s].
std::vector<std::vector<Row>> all_to_all(const std::vector<std::vector<Row>>& send,
                                         const std::vector<std::vector<int64_t>>& counts,
                                         const std::vector<std::vector<int64_t>>& displs,
                                         const std::vector<std::vector<int64_t>>& rcounts,
                                         const std::vector<std::vector<int64_t>>& rdispls, int64_t rows) {
  const size_t n = send.size();
  std::vector<std::vector<Row>> recv(n, std::vector<Row>(size_t(rows), Row{-1, -1, -1}));
  for (size_t s = 0; s < n; ++s)
    for (size_t d = 0; d < n; ++d) {
      EXPECT_EQ(counts[s][d], rcounts[d][s]) << "rank " << s << " -> " << d;
      for (int64_t j = 0; j < counts[s][d]; ++j)
        recv[d][size_t(rdispls[d][s] + j)] = send[s][size_t(displs[s][d] + j)];
    }
  return recv;
}

void check_step(int n, int e, int k, testutil::Routing kind, bool profile, PlanPolicy policy, uint64_t seed) {
  SCOPED_TRACE("N=" + std::to_string(n) + " E=" + std::to_string(e) + " K=" + std::to_string(k) + " routing " +
               std::to_string(int(kind)) + (profile ? " profile" : " round-robin") +
               (policy == PlanPolicy::holders_only ? " holders_only" : " any_rank"));
  std::mt19937_64 rng(seed);
  std::vector<double> prof(size_t(e), 1.0);
  prof[0] = prof[1] = 8.0;
  const Placement pl = profile && n > 1 ? Placement::from_profile(n, prof, 2) : Placement::round_robin(n, e);
  const int64_t s_max = 9;
  std::vector<std::vector<int32_t>> ids(static_cast<size_t>(n));
  std::vector<int64_t> counts(size_t(n * e), 0);
  for (int r = 0; r < n; ++r) {
    ids[size_t(r)] = testutil::make_routing(kind, 2 + (7 * r) % 8, k, e, rng);
    for (const int32_t x : ids[size_t(r)]) ++counts[size_t(r * e + x)];
  }
  const StepPlan plan = plan_step(pl, counts, policy);
  const int64_t recv_cap = policy == PlanPolicy::holders_only ? int64_t(n) * s_max * k : s_max * k;
  std::vector<DispatchLayout> dls;
  std::vector<ReceiveLayout> rls;
  std::vector<std::vector<int32_t>> tables(static_cast<size_t>(n)), resident(static_cast<size_t>(n));
  std::vector<DeviceLayoutOffsets> offs;
  std::vector<std::vector<int64_t>> sc, sd, rc, rd;
  for (int r = 0; r < n; ++r) {
    dls.push_back(dispatch_layout(plan, r, ids[size_t(r)], k, s_max * k));
    rls.push_back(receive_layout(plan, r, recv_cap));
    std::vector<int32_t>& res = resident[size_t(r)];
    if (policy == PlanPolicy::holders_only) res = pl.held_by(r);
    else for (int x = 0; x < e; ++x) res.push_back(x);
    std::vector<int32_t> local_of(size_t(e), -1);
    for (size_t l = 0; l < res.size(); ++l) local_of[size_t(res[l])] = int32_t(l);
    tables[size_t(r)].assign(size_t(3 * s_max * k + 2 * recv_cap + int64_t(res.size()) + 1), -7);
    offs.push_back(pack_device_layout(dls.back(), rls.back(), ids[size_t(r)], k, local_of, int64_t(res.size()), r,
                                      tables[size_t(r)]));
    const int64_t slots = int64_t(ids[size_t(r)].size()), load = int64_t(rls.back().grouped_from.size());
    EXPECT_EQ(offs.back().size, 3 * slots + 2 * load + int64_t(res.size()) + 1);
    sc.push_back(dls.back().send_counts), sd.push_back(dls.back().send_displs);
    rc.push_back(rls.back().recv_counts), rd.push_back(rls.back().recv_displs);
  }
  // Dispatch.
  std::vector<std::vector<Row>> send(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const int32_t* tab = tables[size_t(r)].data() + offs[size_t(r)].send_tok;
    for (size_t i = 0; i < ids[size_t(r)].size(); ++i) send[size_t(r)].push_back(Row{r, tab[i], -1});
  }
  std::vector<std::vector<Row>> recv = all_to_all(send, sc, sd, rc, rd, recv_cap);
  // Experts over the grouped rows, outputs back into the received order.
  for (int d = 0; d < n; ++d) {
    const int32_t* tab = tables[size_t(d)].data();
    const DeviceLayoutOffsets& o = offs[size_t(d)];
    const auto load = int64_t(rls[size_t(d)].grouped_from.size());
    const std::vector<int32_t>& res = resident[size_t(d)];
    EXPECT_EQ(tab[o.off], 0);
    EXPECT_EQ(tab[o.off + int64_t(res.size())], load);
    std::vector<Row> ye(static_cast<size_t>(load));
    for (size_t l = 0; l < res.size(); ++l)
      for (int64_t j = tab[o.off + int64_t(l)]; j < tab[o.off + int64_t(l) + 1]; ++j) {
        ye[size_t(j)] = recv[size_t(d)][size_t(tab[o.grouped_from + j])];
        EXPECT_EQ(ye[size_t(j)][2], -1) << "a received row grouped twice";
        ye[size_t(j)][2] = res[l];
        // The expert computing the row is one the source routed the token to.
        const auto& src = ids[size_t(ye[size_t(j)][0])];
        EXPECT_NE(std::find(src.begin() + ye[size_t(j)][1] * k, src.begin() + ye[size_t(j)][1] * k + k, res[l]),
                  src.begin() + ye[size_t(j)][1] * k + k);
      }
    for (int64_t i = 0; i < load; ++i) recv[size_t(d)][size_t(i)] = ye[size_t(tab[o.ungroup + i])];
  }
  std::vector<std::vector<Row>> back = all_to_all(recv, rc, rd, sc, sd, s_max * k);
  // Combine tables: token t's r-th smallest expert's output, and its slot.
  for (int s = 0; s < n; ++s) {
    const int32_t* tab = tables[size_t(s)].data();
    const DeviceLayoutOffsets& o = offs[size_t(s)];
    const std::vector<int32_t>& id = ids[size_t(s)];
    for (int64_t t = 0; t < int64_t(id.size()) / k; ++t) {
      std::vector<int32_t> want(id.begin() + t * k, id.begin() + t * k + k);
      std::sort(want.begin(), want.end());
      for (int r = 0; r < k; ++r) {
        const int32_t slot = tab[o.comb_slot + t * k + r];
        ASSERT_GE(slot, t * k);
        ASSERT_LT(slot, t * k + k);
        EXPECT_EQ(id[size_t(slot)], want[size_t(r)]) << "rank " << s << " token " << t << " r " << r;
        EXPECT_EQ(back[size_t(s)][size_t(tab[o.comb_row + t * k + r])], (Row{s, t, want[size_t(r)]}))
            << "rank " << s << " token " << t << " r " << r;
      }
    }
  }
}

TEST(DeviceLayout, SimulatedStepDeliversEveryPairInAscendingExpertOrder) {
  uint64_t seed = 1;
  for (const int n : {1, 2, 3, 5})
    for (const auto kind : {testutil::Routing::uniform, testutil::Routing::zipf, testutil::Routing::same_experts})
      for (const bool profile : {false, true})
        for (const PlanPolicy policy : {PlanPolicy::any_rank, PlanPolicy::holders_only})
          for (const auto& [e, k] : {std::pair{16, 4}, std::pair{8, 1}, std::pair{24, 8}})
            check_step(n, e, k, kind, profile, policy, seed++);
}

TEST(DeviceLayout, ErrorsNameTheArgument) {
  const Placement pl = Placement::round_robin(2, 4);
  const std::vector<int32_t> ids{0, 1, 2, 3};  // 2 tokens, K = 2
  const std::vector<int64_t> counts{1, 1, 1, 1, 0, 0, 0, 0};
  const StepPlan plan = plan_step(pl, counts);
  const DispatchLayout dl = dispatch_layout(plan, 0, ids, 2, 8);
  const ReceiveLayout rl = receive_layout(plan, 0, 8);
  std::vector<int32_t> small(4), big(64);
  const std::vector<int32_t> all{0, 1, 2, 3}, none{-1, -1, -1, -1};
  EXPECT_KIMI_ERROR(pack_device_layout(dl, rl, ids, 2, all, 4, 0, small), "dist::pack_device_layout", "'out'",
                    "got 4");
  EXPECT_KIMI_ERROR(pack_device_layout(dl, rl, ids, 2, none, 0, 0, big), "dist::pack_device_layout",
                    "rank 0 expert", "does not keep");
}

}  // namespace
}  // namespace kimi::dist
