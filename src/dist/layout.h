// dist/layout.h: dispatch and receive layouts of one rank for a StepPlan (docs/ep.md).
//
// Dispatch (source rank s, T <= S local tokens, ids [T, K]): the slot t*K + k is pair number (its rank among
// s's pairs of expert e = ids[t, k], in slot order) of source s's pairs of e, so its global index is
// g = source_offset[s, e] + that number, and its destination is the segment of e containing g. The send buffer
// is grouped by destination rank (the all_to_all_v blocks), inside a block by (expert, g) ascending:
//   send row i carries slot send_slot[i]; block d = rows [send_displs[d], send_displs[d] + send_counts[d]).
// Receive (destination rank d): the block from source s holds, expert by expert (ascending), the pairs of
// s's range of e that fall in e's segments on d, in g order; recv_counts[s] rows at recv_displs[s].
// grouped_from permutes received rows into the grouped-GEMM layout: local expert i (experts[i]) owns grouped
// rows [expert_rows[i], expert_rows[i+1]); grouped row j is received row grouped_from[j]. Within an expert the
// rows are in global order g (source, then local order).
// Bounds: sum(send_counts) = T*K <= S*K; sum(recv_counts) = load[d] <= ceil(P/N) <= S*K (planner.h): both
// buffers are static [S*K, width] rows and the layouts throw if a bound is violated (never silently).
// The combine runs the same layouts backwards: rows go back with the counts swapped.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "dist/planner.h"

namespace kimi::dist {

struct DispatchLayout {
  std::vector<int64_t> send_counts, send_displs;  // [N] rows per destination
  std::vector<int64_t> send_slot;                 // [T*K] send row -> slot t*K + k
};

struct ReceiveLayout {
  std::vector<int64_t> recv_counts, recv_displs;  // [N] rows per source
  std::vector<int32_t> experts;                   // the experts this rank computes this step (ascending)
  std::vector<int64_t> expert_rows;               // [experts + 1] offsets into the grouped rows
  std::vector<int64_t> grouped_from;              // [load] grouped row -> received row
};

// ids i32 [T, K] row-major (this rank's routing; must match plan.counts[rank]); capacity = S*K rows.
DispatchLayout dispatch_layout(const StepPlan& plan, int rank, std::span<const int32_t> ids, int top_k,
                               int64_t capacity);
ReceiveLayout receive_layout(const StepPlan& plan, int rank, int64_t capacity);

}  // namespace kimi::dist
