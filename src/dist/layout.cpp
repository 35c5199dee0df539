// dist/layout.cpp: dispatch / receive layouts (the layouts and bounds: layout.h).
#include "dist/layout.h"

#include <algorithm>
#include <string>

#include "kimi/error.h"

namespace kimi::dist {

namespace {

void check_rank(const char* fn, const StepPlan& plan, int rank) {
  if (rank < 0 || rank >= plan.ranks)
    throw Error(std::string(fn) + ": argument 'rank': expected 0 <= rank < " + std::to_string(plan.ranks) + ", got " +
                std::to_string(rank));
}

void check_capacity(const char* fn, const char* what, int64_t rows, int64_t capacity) {
  if (rows > capacity)
    throw Error(std::string(fn) + ": " + what + ": expected at most the static buffer's " + std::to_string(capacity) +
                " rows (S*K), got " + std::to_string(rows));
}

// Rows of [lo, hi) that segment s covers.
int64_t overlap(const Segment& s, int64_t lo, int64_t hi) {
  return std::max<int64_t>(0, std::min(hi, s.end) - std::max(lo, s.begin));
}

}  // namespace

DispatchLayout dispatch_layout(const StepPlan& plan, int rank, std::span<const int32_t> ids, int top_k,
                               int64_t capacity) {
  const char* fn = "dist::dispatch_layout";
  check_rank(fn, plan, rank);
  const auto se = size_t(plan.experts), sn = size_t(plan.ranks);
  if (top_k < 1 || ids.size() % size_t(top_k) != 0)
    throw Error(std::string(fn) + ": argument 'ids': expected [T, " + std::to_string(top_k) + "] values, got " +
                std::to_string(ids.size()));
  check_capacity(fn, "argument 'ids' (T*K pairs)", int64_t(ids.size()), capacity);
  // Local pair number of each slot within its expert, and the check against the all-gathered counts.
  std::vector<int64_t> seen(se, 0), number(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t e = ids[i];
    if (e < 0 || size_t(e) >= se)
      throw Error(std::string(fn) + ": argument 'ids[" + std::to_string(i) + "]': expected an expert in [0, " +
                  std::to_string(se) + "), got " + std::to_string(e));
    number[i] = seen[size_t(e)]++;
  }
  for (size_t e = 0; e < se; ++e)
    if (seen[e] != plan.counts[size_t(rank) * se + e])
      throw Error(std::string(fn) + ": argument 'ids': expert " + std::to_string(e) + " has " +
                  std::to_string(seen[e]) + " pairs, but the plan's counts[" + std::to_string(rank) + ", " +
                  std::to_string(e) + "] is " + std::to_string(plan.counts[size_t(rank) * se + e]));
  // Destination of each slot; then a stable counting sort by (destination, expert, g).
  std::vector<int32_t> dest(ids.size());
  std::vector<size_t> by_expert(ids.size());
  {
    std::vector<size_t> start(se + 1, 0);
    for (int32_t e : ids) ++start[size_t(e) + 1];
    for (size_t e = 0; e < se; ++e) start[e + 1] += start[e];
    for (size_t i = 0; i < ids.size(); ++i) by_expert[start[size_t(ids[i])]++] = i;  // (expert, number) order
  }
  DispatchLayout out;
  out.send_counts.assign(sn, 0);
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto e = size_t(ids[i]);
    const int64_t g = plan.source_offset[size_t(rank) * se + e] + number[i];
    const auto segs = plan.expert_segments(int(e));
    const auto it =
        std::upper_bound(segs.begin(), segs.end(), g, [](int64_t v, const Segment& s) { return v < s.end; });
    dest[i] = it->rank;
    ++out.send_counts[size_t(it->rank)];
  }
  out.send_displs.assign(sn, 0);
  for (size_t d = 1; d < sn; ++d) out.send_displs[d] = out.send_displs[d - 1] + out.send_counts[d - 1];
  out.send_slot.resize(ids.size());
  std::vector<int64_t> fill = out.send_displs;
  for (size_t i : by_expert) out.send_slot[size_t(fill[size_t(dest[i])]++)] = int64_t(i);
  return out;
}

ReceiveLayout receive_layout(const StepPlan& plan, int rank, int64_t capacity) {
  const char* fn = "dist::receive_layout";
  check_rank(fn, plan, rank);
  const auto se = size_t(plan.experts), sn = size_t(plan.ranks);
  // rows[s][e]: pairs of source s's range of expert e computed on `rank`.
  std::vector<int64_t> rows(sn * se, 0);
  std::vector<char> local(se, 0);
  for (size_t e = 0; e < se; ++e)
    for (const Segment& seg : plan.expert_segments(int(e))) {
      if (seg.rank != rank) continue;
      local[e] = 1;
      for (size_t s = 0; s < sn; ++s) {
        const int64_t lo = plan.source_offset[s * se + e];
        rows[s * se + e] += overlap(seg, lo, lo + plan.counts[s * se + e]);
      }
    }
  ReceiveLayout out;
  out.recv_counts.assign(sn, 0);
  out.recv_displs.assign(sn, 0);
  for (size_t s = 0; s < sn; ++s) {
    for (size_t e = 0; e < se; ++e) out.recv_counts[s] += rows[s * se + e];
    if (s > 0) out.recv_displs[s] = out.recv_displs[s - 1] + out.recv_counts[s - 1];
  }
  const int64_t total = out.recv_displs[sn - 1] + out.recv_counts[sn - 1];
  check_capacity(fn, "this rank's load", total, capacity);
  // Received row of (s, e)'s first row: recv_displs[s] + rows of s's earlier experts.
  std::vector<int64_t> first(sn * se, 0);
  for (size_t s = 0; s < sn; ++s) {
    int64_t at = out.recv_displs[s];
    for (size_t e = 0; e < se; ++e) {
      first[s * se + e] = at;
      at += rows[s * se + e];
    }
  }
  out.grouped_from.reserve(size_t(total));
  out.expert_rows.push_back(0);
  for (size_t e = 0; e < se; ++e) {
    if (!local[e]) continue;
    out.experts.push_back(int32_t(e));
    for (size_t s = 0; s < sn; ++s)
      for (int64_t j = 0; j < rows[s * se + e]; ++j) out.grouped_from.push_back(first[s * se + e] + j);
    out.expert_rows.push_back(int64_t(out.grouped_from.size()));
  }
  return out;
}

}  // namespace kimi::dist
