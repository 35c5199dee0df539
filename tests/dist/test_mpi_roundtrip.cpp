// tests/dist/test_mpi_roundtrip.cpp (under mpirun): known rows through the real transport. Each rank routes its
// own tokens, all-gathers the counts, plans, dispatches rows tagged (source, slot, expert) with all_to_all_v, checks
// the grouped rows (each expert's rows carry that expert; count = the plan's load), applies f(row) = row * (2 + e)
// and combines back; each source then checks every slot came back exactly as f of what it sent.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "dist/layout.h"
#include "dist/mpi_world.h"
#include "dist/planner.h"
#include "dist/routing.h"

namespace kimi::dist {
namespace {

using testutil::Routing;

constexpr int kWidth = 5;  // row: [source, slot, expert, c, c] doubles

void round_trip(Routing kind, int e, int k, int64_t s_max, uint64_t seed) {
  Comm& comm = testutil::world();
  const int n = comm.size(), me = comm.rank();
  std::mt19937_64 rng(seed * 1000 + uint64_t(me));
  const int64_t t = std::uniform_int_distribution<int64_t>(s_max / 2, s_max)(rng);
  const std::vector<int32_t> ids = testutil::make_routing(kind, t, k, e, rng, 1.2, n, 0);
  const std::vector<int64_t> mine = testutil::count_routing(ids, e);
  std::vector<int64_t> counts(size_t(n * e));
  comm.all_gather(mine.data(), mine.size() * sizeof(int64_t), counts.data());
  const Placement pl = Placement::round_robin(n, e);
  const StepPlan plan = plan_step(pl, counts);
  const int64_t cap = s_max * k;
  const DispatchLayout dl = dispatch_layout(plan, me, ids, k, cap);
  const ReceiveLayout rl = receive_layout(plan, me, cap);

  std::vector<double> send(size_t(cap * kWidth), -1.0), recv(size_t(cap * kWidth), -1.0);  // static [S*K, w]
  for (size_t i = 0; i < dl.send_slot.size(); ++i) {
    const int64_t slot = dl.send_slot[i];
    const double row[kWidth] = {double(me), double(slot), double(ids[size_t(slot)]), 0.5, -0.25};
    std::copy_n(row, kWidth, &send[i * kWidth]);
  }
  comm.all_to_all_v(send.data(), dl.send_counts, dl.send_displs, recv.data(), rl.recv_counts, rl.recv_displs,
                    kWidth * sizeof(double));
  ASSERT_EQ(int64_t(rl.grouped_from.size()), plan.load[size_t(me)]);
  for (size_t i = 0; i < rl.experts.size(); ++i)
    for (int64_t j = rl.expert_rows[i]; j < rl.expert_rows[i + 1]; ++j) {
      double* row = &recv[size_t(rl.grouped_from[size_t(j)] * kWidth)];
      ASSERT_EQ(row[2], double(rl.experts[i])) << "rank " << me << " grouped row " << j;
      for (int c = 3; c < kWidth; ++c) row[c] *= 2.0 + rl.experts[i];
    }
  // Combine: the same layouts backwards.
  std::vector<double> back(size_t(cap * kWidth), -1.0);
  comm.all_to_all_v(recv.data(), rl.recv_counts, rl.recv_displs, back.data(), dl.send_counts, dl.send_displs,
                    kWidth * sizeof(double));
  std::vector<int> hits(ids.size(), 0);
  for (size_t i = 0; i < dl.send_slot.size(); ++i) {
    const double* row = &back[i * kWidth];
    const auto slot = size_t(dl.send_slot[i]);
    ASSERT_EQ(row[0], double(me));
    ASSERT_EQ(row[1], double(slot));
    const double f = 2.0 + ids[slot];
    EXPECT_EQ(row[3], 0.5 * f);
    EXPECT_EQ(row[4], -0.25 * f);
    ++hits[slot];
  }
  for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i], 1) << "rank " << me << " slot " << i;
  // Balance of the real step: every rank's load within floor/ceil of P / N.
  std::vector<int64_t> loads(static_cast<size_t>(n));
  const int64_t my_load = int64_t(rl.grouped_from.size());
  comm.all_gather(&my_load, sizeof(int64_t), loads.data());
  for (int r = 0; r < n; ++r) {
    EXPECT_GE(loads[size_t(r)], plan.total_pairs / n);
    EXPECT_LE(loads[size_t(r)], (plan.total_pairs + n - 1) / n);
  }
}

TEST(MpiRoundTrip, Uniform) { round_trip(Routing::uniform, 16, 4, 24, 1); }
TEST(MpiRoundTrip, Zipf) { round_trip(Routing::zipf, 64, 8, 32, 2); }
TEST(MpiRoundTrip, SameExperts) { round_trip(Routing::same_experts, 16, 4, 24, 3); }
TEST(MpiRoundTrip, OneRanksExperts) { round_trip(Routing::one_rank, 16, 2, 24, 4); }

TEST(MpiComm, AllReduceAndBarrier) {
  Comm& comm = testutil::world();
  std::vector<int64_t> v{comm.rank(), 1};
  comm.all_reduce_sum(std::span<int64_t>(v));
  EXPECT_EQ(v[0], int64_t(comm.size()) * (comm.size() - 1) / 2);
  EXPECT_EQ(v[1], comm.size());
  std::vector<double> d{0.5};
  comm.all_reduce_sum(std::span<double>(d));
  EXPECT_EQ(d[0], 0.5 * comm.size());
  comm.barrier();
}

}  // namespace
}  // namespace kimi::dist
