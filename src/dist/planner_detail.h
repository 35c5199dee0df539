// dist/planner_detail.h: what plan_step's two policies share (internal to src/dist; the math: planner.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "dist/planner.h"

namespace kimi::dist::detail {

// Piece j of expert e: [begin, end) of e's global pair order, owned by holders[e][j] (floor/ceil(c_e / m_e) pairs).
struct Piece {
  int32_t expert, rank;
  int64_t begin, end, give;  // give: pairs of its tail moved away (any-rank policy)
};

// The holders-only balance (planner_restricted.cpp): fills plan.segments, seg_start, load and the move counts from
// c [E] (pairs per expert) and the pieces (expert e's are pieces[piece_start[e], piece_start[e + 1])); plan's counts,
// source_offset, total_pairs and home_load are already set.
void balance_holders_only(const Placement& placement, std::span<const int64_t> c, std::span<const Piece> pieces,
                          std::span<const size_t> piece_start, StepPlan& plan);

}  // namespace kimi::dist::detail
