// tests/dist/device_plan_sim.h: runs the device plan's functions (dist/device_plan.h) on the CPU for one rank, each
// phase as a loop over the indices the CUDA launches cover (dist/plan_cuda.cu), with host arrays of the sizes the
// device buffers have.
#pragma once

#include <cstdint>
#include <vector>

#include "dist/device_plan.h"
#include "dist/planner.h"

namespace kimi::testutil {

struct DevicePlanSim {
  dist::dplan::Dims d;
  std::vector<int32_t> counts, hold_start{0}, hold, hold_expert, order, share_first, share_count, sh_rank, seg_start,
      seg_rank, seg_moved, ids, local_of, resident, send_count, number, send_row, recv_count, off, grouped_from,
      comb_slot;
  std::vector<int64_t> c, so, home_load, target, load, give, sh_begin, sh_end, seg_begin, seg_end, stats, first, rs,
      gbase, erows, recv_first, seen;
  dist::dplan::Global g{};
  dist::dplan::Local l{};

  // counts32 [N*E] all ranks' counts; rank_ids this rank's routing [T*K]; resident_experts ascending.
  DevicePlanSim(const dist::Placement& pl, int rank, const std::vector<int32_t>& counts32,
                const std::vector<int32_t>& rank_ids, int k, const std::vector<int32_t>& resident_experts,
                int64_t cap, int64_t recv_cap)
      : counts(counts32), ids(rank_ids), resident(resident_experts) {
    d.n = pl.ranks, d.e = pl.experts, d.k = k, d.me = rank, d.r = int32_t(resident.size());
    d.t = int64_t(ids.size()) / k, d.cap = cap, d.recv_cap = recv_cap;
    for (int32_t e = 0; e < d.e; ++e) {
      for (const int32_t r : pl.holders[size_t(e)]) hold.push_back(r), hold_expert.push_back(e);
      hold_start.push_back(int32_t(hold.size()));
    }
    d.h = int64_t(hold.size());
    const auto n = size_t(d.n), e = size_t(d.e), h = size_t(d.h);
    const auto shares = size_t(dist::dplan::max_shares(d)), segs = size_t(dist::dplan::max_segments(d));
    const size_t slots = ids.size();
    // Filled with sentinels: every entry the phases read must have been written by an earlier phase.
    order.assign(h, -7), share_first.assign(h, -7), share_count.assign(h, -7), sh_rank.assign(shares, -7);
    seg_start.assign(e + 1, -7), seg_rank.assign(segs, -7), seg_moved.assign(segs, -7);
    local_of.assign(e, -1);
    for (size_t x = 0; x < resident.size(); ++x) local_of[size_t(resident[x])] = int32_t(x);
    send_count.assign(n, -7), number.assign(slots, -7), send_row.assign(slots, -7), recv_count.assign(n, -7);
    off.assign(resident.size() + 1, -7), grouped_from.assign(size_t(recv_cap), -7), comb_slot.assign(slots, -7);
    c.assign(e, -7), so.assign(n * e, -7), home_load.assign(n, -7), target.assign(n, -7), load.assign(n, -7);
    give.assign(h, -7), sh_begin.assign(shares, -7), sh_end.assign(shares, -7), seg_begin.assign(segs, -7);
    seg_end.assign(segs, -7), stats.assign(dist::dplan::kStats, -7), first.assign(e * n, -7), rs.assign(n * e, -7);
    gbase.assign(n * e, -7), erows.assign(e, -7), recv_first.assign(n * e, -7), seen.assign(e, -7);
    g = {counts.data(), hold_start.data(), hold.data(), hold_expert.data(), c.data(), so.data(), home_load.data(),
         target.data(), load.data(), give.data(), order.data(), share_first.data(), share_count.data(),
         sh_rank.data(), sh_begin.data(), sh_end.data(), seg_start.data(), seg_rank.data(), seg_begin.data(),
         seg_end.data(), seg_moved.data(), stats.data()};
    l = {ids.data(), local_of.data(), resident.data(), first.data(), send_count.data(), number.data(),
         send_row.data(), rs.data(), gbase.data(), erows.data(), recv_first.data(), recv_count.data(), off.data(),
         grouped_from.data(), comb_slot.data()};
    namespace dp = dist::dplan;
    for (int32_t x = 0; x < d.e; ++x) dp::plan_expert(d, g, x);
    dp::plan_serial(d, g);
    for (int32_t x = 0; x < d.n; ++x) dp::send_block(d, g, l, x);
    dp::slot_numbers(d, l, seen.data());
    for (int64_t i = 0; i < int64_t(slots); ++i) dp::send_row(d, g, l, i);
    for (int32_t x = 0; x < d.e; ++x) dp::expert_rows(d, g, l, x);
    for (int32_t s = 0; s < d.n; ++s) dp::source_rows(d, l, s);
    dp::expert_offsets(d, g, l);
    for (int32_t s = 0; s < d.n; ++s)
      for (int32_t x = 0; x < d.e; ++x) dp::grouped_rows(d, l, s, x);
    for (int64_t t = 0; t < d.t; ++t) dp::combine_order(d, l, t);
  }
};

}  // namespace kimi::testutil
