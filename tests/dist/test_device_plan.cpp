// tests/dist/test_device_plan.cpp: the device plan (dist/device_plan.h), its functions run on the CPU
// (device_plan_sim.h), against the host planner and layouts (plan_step, dispatch_layout, receive_layout,
// pack_device_layout): for N in 1..5 ranks, ranks of different token counts (one with none), uniform, Zipf,
// same-experts (every token on experts 0..K-1) and one-rank (every token on rank 0's experts) routings, round-robin
// and profile placements (hot experts replicated), every rank's
//   - global plan: segment for segment (rank, begin, end, moved) equal to plan_step's any-rank plan, and the same
//     home loads, loads, total / moved pairs, moved segments, donor pieces, underloaded ranks; no error bit;
//   - fixed-slot layouts: send_row[i] = d*C + (slot i's place in dispatch_layout's block d); send counts;
//     grouped_from = receive_layout's grouped rows, each received row r of source s at s*C + r - recv_displs[s];
//     expert offsets and combine slots equal pack_device_layout's;
// and a simulated step through the fixed slots (every row carries (source, token, expert)): each pair is computed
// once, by the expert it was routed to, and returns to its slot. In a build with the NCCL transport, the same
// functions launched on the GPU (DevicePlan, plan_cuda.h) give the same tables (a GPU test).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <random>
#include <string>
#include <vector>

#include "dist/device_layout.h"
#include "dist/device_plan_sim.h"
#include "dist/routing.h"

#ifdef KIMI_WITH_NCCL
#include <cuda_runtime.h>

#include "dist/plan_cuda.h"
#include "kimi/device.h"
#endif

namespace kimi::dist {
namespace {

using testutil::DevicePlanSim;
using testutil::Routing;

// N ranks' routings (rank 1 without tokens), their counts and the placement.
struct Scenario {
  int n = 0, e = 0, k = 0;
  int64_t cap = 0;  // C = S*K
  Placement pl;
  std::vector<std::vector<int32_t>> ids;
  std::vector<int64_t> counts;
};

Scenario make_scenario(int n, int e, int k, Routing kind, bool profile, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> prof(size_t(e), 1.0);
  prof[0] = prof[1] = 8.0;
  Scenario sc{n, e, k, 11 * int64_t(k),
              profile && n > 1 ? Placement::from_profile(n, prof, 2) : Placement::round_robin(n, e), {}, {}};
  const int64_t s_max = 11;
  sc.ids.resize(size_t(n));
  sc.counts.assign(size_t(n * e), 0);
  for (int r = 0; r < n; ++r) {
    const int64_t t = r == 1 ? 0 : 1 + (5 * r + int(seed)) % s_max;  // rank 1 has no tokens
    sc.ids[size_t(r)] = kind == Routing::one_rank && k > (e + n - 1) / n
                            ? testutil::make_routing(Routing::same_experts, t, k, e, rng)
                            : testutil::make_routing(kind, t, k, e, rng, 1.2, n, 0);
    for (const int32_t x : sc.ids[size_t(r)]) ++sc.counts[size_t(r * e + x)];
  }
  return sc;
}

void check_plan(int n, int e, int k, Routing kind, bool profile, uint64_t seed) {
  SCOPED_TRACE("N=" + std::to_string(n) + " E=" + std::to_string(e) + " K=" + std::to_string(k) + " routing " +
               std::to_string(int(kind)) + (profile ? " profile" : " round-robin") + " seed " + std::to_string(seed));
  const Scenario sc = make_scenario(n, e, k, kind, profile, seed);
  const Placement& pl = sc.pl;
  const int64_t cap = sc.cap;
  const std::vector<std::vector<int32_t>>& ids = sc.ids;
  const std::vector<int64_t>& counts = sc.counts;
  const std::vector<int32_t> counts32(counts.begin(), counts.end());
  const StepPlan plan = plan_step(pl, counts);
  std::vector<int32_t> all(static_cast<size_t>(e)), local_of(static_cast<size_t>(e));
  for (int x = 0; x < e; ++x) all[size_t(x)] = local_of[size_t(x)] = x;

  std::vector<DevicePlanSim> sims;
  for (int r = 0; r < n; ++r) sims.emplace_back(pl, r, counts32, ids[size_t(r)], k, all, cap, cap);
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const DevicePlanSim& sim = sims[size_t(r)];
    // The global plan, segment for segment.
    ASSERT_EQ(sim.stats[dplan::kError], 0);
    EXPECT_EQ(sim.home_load, plan.home_load);
    EXPECT_EQ(sim.load, plan.load);
    EXPECT_EQ(sim.stats[dplan::kTotal], plan.total_pairs);
    EXPECT_EQ(sim.stats[dplan::kMoved], plan.moved_pairs);
    EXPECT_EQ(sim.stats[dplan::kMovedSegments], plan.moved_segments);
    EXPECT_EQ(sim.stats[dplan::kDonorPieces], plan.donor_pieces);
    EXPECT_EQ(sim.stats[dplan::kUnderloaded], plan.underloaded_ranks);
    for (int x = 0; x < e; ++x) {
      const auto segs = plan.expert_segments(x);
      ASSERT_EQ(sim.seg_start[size_t(x) + 1] - sim.seg_start[size_t(x)], int64_t(segs.size())) << "expert " << x;
      for (size_t j = 0; j < segs.size(); ++j) {
        const auto at = size_t(sim.seg_start[size_t(x)]) + j;
        EXPECT_EQ(sim.seg_rank[at], segs[j].rank) << "expert " << x << " segment " << j;
        EXPECT_EQ(sim.seg_begin[at], segs[j].begin) << "expert " << x << " segment " << j;
        EXPECT_EQ(sim.seg_end[at], segs[j].end) << "expert " << x << " segment " << j;
        EXPECT_EQ(sim.seg_moved[at], segs[j].moved ? 1 : 0) << "expert " << x << " segment " << j;
      }
    }
    // The layouts, against the host's placed in fixed slots.
    const DispatchLayout dl = dispatch_layout(plan, r, ids[size_t(r)], k, cap);
    const ReceiveLayout rl = receive_layout(plan, r, cap);
    for (int dst = 0; dst < n; ++dst) {
      EXPECT_EQ(sim.send_count[size_t(dst)], dl.send_counts[size_t(dst)]) << "dest " << dst;
      EXPECT_EQ(sim.recv_count[size_t(dst)], rl.recv_counts[size_t(dst)]) << "source " << dst;
      for (int64_t j = 0; j < dl.send_counts[size_t(dst)]; ++j) {
        const int64_t slot = dl.send_slot[size_t(dl.send_displs[size_t(dst)] + j)];
        EXPECT_EQ(sim.send_row[size_t(slot)], dst * cap + j) << "slot " << slot;
      }
    }
    const auto load = int64_t(rl.grouped_from.size());
    for (int64_t j = 0; j < load; ++j) {
      const int64_t from = rl.grouped_from[size_t(j)];
      int64_t s = 0;
      while (from >= rl.recv_displs[size_t(s)] + rl.recv_counts[size_t(s)]) ++s;
      EXPECT_EQ(sim.grouped_from[size_t(j)], s * cap + from - rl.recv_displs[size_t(s)]) << "grouped row " << j;
    }
    std::vector<int32_t> packed(size_t(3 * cap + 2 * cap + e + 1));
    const DeviceLayoutOffsets o = pack_device_layout(dl, rl, ids[size_t(r)], k, local_of, e, r, packed);
    EXPECT_EQ(sim.off, std::vector<int32_t>(packed.begin() + o.off, packed.begin() + o.off + e + 1));
    EXPECT_EQ(sim.comb_slot, std::vector<int32_t>(packed.begin() + o.comb_slot, packed.begin() + o.size));
  }

  // A simulated step through the fixed slots: dispatch, experts, the combine back.
  using Row = std::array<int64_t, 3>;  // (source, token, expert); expert -1 before the experts ran
  std::vector<std::vector<Row>> send(size_t(n), std::vector<Row>(size_t(n * cap), Row{-9, -9, -9}));
  for (int s = 0; s < n; ++s)
    for (size_t i = 0; i < ids[size_t(s)].size(); ++i)
      send[size_t(s)][size_t(sims[size_t(s)].send_row[i])] = Row{s, int64_t(i) / k, -1};
  const auto all_to_all = [&](const std::vector<std::vector<Row>>& from) {  // block d of s -> block s of d
    std::vector<std::vector<Row>> to(size_t(n), std::vector<Row>(size_t(n * cap)));
    for (int s = 0; s < n; ++s)
      for (int dst = 0; dst < n; ++dst)
        std::copy_n(from[size_t(s)].begin() + dst * cap, cap, to[size_t(dst)].begin() + s * cap);
    return to;
  };
  std::vector<std::vector<Row>> recv = all_to_all(send);
  for (int dst = 0; dst < n; ++dst) {
    const DevicePlanSim& sim = sims[size_t(dst)];
    ASSERT_EQ(sim.off[size_t(e)], plan.load[size_t(dst)]);
    for (int x = 0; x < e; ++x)
      for (int32_t j = sim.off[size_t(x)]; j < sim.off[size_t(x) + 1]; ++j) {
        Row& row = recv[size_t(dst)][size_t(sim.grouped_from[size_t(j)])];
        ASSERT_GE(row[0], 0) << "rank " << dst << " grouped row " << j << " reads an unsent row";
        EXPECT_EQ(row[2], -1) << "a received row grouped twice";
        const auto& src = ids[size_t(row[0])];
        EXPECT_NE(std::find(src.begin() + row[1] * k, src.begin() + row[1] * k + k, x), src.begin() + row[1] * k + k)
            << "expert " << x << " computes a pair not routed to it";
        row[2] = x;
      }
  }
  const std::vector<std::vector<Row>> back = all_to_all(recv);
  for (int s = 0; s < n; ++s) {
    const DevicePlanSim& sim = sims[size_t(s)];
    const std::vector<int32_t>& id = ids[size_t(s)];
    for (int64_t t = 0; t < int64_t(id.size()) / k; ++t) {
      std::vector<int32_t> want(id.begin() + t * k, id.begin() + t * k + k);
      std::sort(want.begin(), want.end());
      for (int r = 0; r < k; ++r) {
        const int32_t slot = sim.comb_slot[size_t(t * k + r)];
        EXPECT_EQ(id[size_t(slot)], want[size_t(r)]) << "rank " << s << " token " << t;
        EXPECT_EQ(back[size_t(s)][size_t(sim.send_row[size_t(slot)])], (Row{s, t, want[size_t(r)]}))
            << "rank " << s << " token " << t << " r " << r;
      }
    }
  }
}

TEST(DevicePlan, EqualsTheHostPlanAndLayouts) {
  uint64_t seed = 1;
  for (int n = 1; n <= 5; ++n)
    for (const Routing kind : {Routing::uniform, Routing::zipf, Routing::same_experts, Routing::one_rank})
      for (const bool profile : {false, true})
        for (const auto& [e, k] : {std::pair{16, 4}, std::pair{8, 1}, std::pair{24, 8}, std::pair{5, 5}})
          for (int rep = 0; rep < 3; ++rep) check_plan(n, e, k, kind, profile, seed++);
}

// A K3-like skew at more ranks: 64 experts, top-8, Zipf 1.2, 5 ranks of 40 tokens, replicas from the profile.
TEST(DevicePlan, EqualsTheHostPlanUnderHeavySkew) {
  for (uint64_t seed = 100; seed < 104; ++seed) check_plan(5, 64, 8, Routing::zipf, true, seed);
}

// With one rank's experts not resident (holders-only weights), the device tables flag it instead of writing.
TEST(DevicePlan, FlagsAnExpertThatIsNotResident) {
  const Placement pl = Placement::round_robin(1, 4);
  const std::vector<int32_t> ids{0, 1, 2, 3}, counts{1, 1, 1, 1};
  const DevicePlanSim sim(pl, 0, counts, ids, 2, {0, 1}, 4, 4);
  EXPECT_EQ(sim.stats[dplan::kError] & dplan::kErrNotResident, dplan::kErrNotResident);
  EXPECT_EQ(sim.off, (std::vector<int32_t>{0, 1, 2}));
}

}  // namespace
}  // namespace kimi::dist

#ifdef KIMI_WITH_NCCL
namespace kimi::dist {
namespace {

template <class T>
std::vector<T> download(const T* p, int64_t count) {
  std::vector<T> v(static_cast<size_t>(count));
  if (count > 0) {
    EXPECT_EQ(cudaMemcpy(v.data(), p, size_t(count) * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  }
  return v;
}

Tensor upload(const std::vector<int32_t>& v, Device dev) {
  Tensor d = Tensor::uninitialized(DType::i32, {std::max<int64_t>(int64_t(v.size()), 1)}, dev);
  if (!v.empty()) {
    EXPECT_EQ(cudaMemcpy(d.data(), v.data(), v.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the upload, before the non-blocking stream reads it
  return d;
}

// The device plan's launches (plan_cuda.h) on the GPU, one DevicePlan per simulated rank given every rank's counts
// directly (no comm): the plan (home loads, loads, stats) and every table (send rows, combine slots, expert offsets,
// grouped rows) equal the CPU run of the same functions, which equals the host planner (the tests above); the slot
// numbers come from the one-warp kernel here (a loop on the CPU). GPU test: skips without a device.
TEST(DevicePlan, GpuLaunchesEqualTheCpuFunctions) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (these run on the GPU machine)";
  const Device dev = Device::cuda(0);
  cudaStream_t st = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  uint64_t seed = 500;
  for (int n = 1; n <= 5; ++n)
    for (const Routing kind : {Routing::uniform, Routing::zipf, Routing::same_experts, Routing::one_rank})
      for (const bool profile : {false, true})
        for (const auto& [e, k] : {std::pair{16, 4}, std::pair{24, 8}, std::pair{64, 8}, std::pair{5, 5}}) {
          SCOPED_TRACE("N=" + std::to_string(n) + " E=" + std::to_string(e) + " K=" + std::to_string(k) +
                       " routing " + std::to_string(int(kind)) + (profile ? " profile" : "") + " seed " +
                       std::to_string(seed));
          const Scenario sc = make_scenario(n, e, k, kind, profile, seed++);
          const std::vector<int32_t> counts32(sc.counts.begin(), sc.counts.end());
          std::vector<int32_t> all(static_cast<size_t>(e));
          for (int x = 0; x < e; ++x) all[size_t(x)] = x;
          const Tensor counts_d = upload(counts32, dev);
          for (int r = 0; r < n; ++r) {
            SCOPED_TRACE("rank " + std::to_string(r));
            const std::vector<int32_t>& id = sc.ids[size_t(r)];
            const DevicePlanSim sim(sc.pl, r, counts32, id, k, all, sc.cap, sc.cap);
            DevicePlan dp(sc.pl, r, all, sc.cap / k, k, sc.cap, sc.cap, dev);
            const Tensor ids_d = upload(id, dev);
            const auto slots = int64_t(id.size());
            dp.enqueue(counts_d.data_as<int32_t>(), ids_d.data_as<int32_t>(), slots / k, st);
            ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
            EXPECT_EQ(download(dp.stats(), dplan::kStats), sim.stats);
            EXPECT_EQ(download(dp.home_load(), n), sim.home_load);
            EXPECT_EQ(download(dp.load(), n), sim.load);
            EXPECT_EQ(download(dp.send_row(), slots), sim.send_row);
            EXPECT_EQ(download(dp.comb_slot(), slots), sim.comb_slot);
            EXPECT_EQ(download(dp.offsets(), e + 1), sim.off);
            const int64_t load = sim.off[size_t(e)];
            EXPECT_EQ(download(dp.grouped_from(), load),
                      std::vector<int32_t>(sim.grouped_from.begin(), sim.grouped_from.begin() + load));
          }
        }
  cudaStreamDestroy(st);
}

}  // namespace
}  // namespace kimi::dist
#endif  // KIMI_WITH_NCCL
