// src/cuda/kda/segment_plan.h: the cost model behind the CUDA chunkwise KDA walk's sequence parallelism
// (src/cuda/kda/chunk.cuh, "Segments"; the launcher src/cuda/kda/chunk.cu asks it for a segment length). Host code
// only, with no CUDA dependency, so that it builds and is tested everywhere (tests/test_kda_segment_plan.cpp).
//
// The walk runs one CTA per (sequence or segment, head, V tile), one CTA per SM, each chunk a fixed time. Split into
// P segments, a sequence costs phase 1 (segment 0 walked with outputs; each middle segment's affine map: its value
// columns and as many identity columns, no outputs), a sequential scan of the maps, and phase 3 (segments 1 .. P - 1
// walked again with outputs from their start states). The model prices each phase by greedy list scheduling of its
// CTAs, in grid order, on the SMs, and picks the segment length of the lowest modelled time.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace kimi::kda_plan {

// The walk the model prices (walk_rs.cuh), for the plain walk and for the segments alike. full / map: us per chunk of
// one CTA with / without outputs; nv: V tiles of 64 per head; keep: the fraction of the plain walk's modelled time the
// segments must come under to be taken (a 10% margin for the model's error). The constants and their measurements:
// segment_plan.cpp.
struct WalkCosts {
  double full, map;
  int nv;
  double keep;
  static WalkCosts of(int64_t D);
};

// Runs of CTAs in grid order: count CTAs of equal cost (us); CTAs that return at once are left out.
struct Runs {
  std::vector<std::pair<double, int64_t>> r;
  double work = 0, longest = 0;  // sum and max of the costs
  void add(double cost, int64_t count);
  double lower_bound(int sms) const;  // max(work / sms, longest)
};

// Makespan (us) of the runs on sms SMs, one CTA at a time each, every CTA dispatched in order to the first free SM
// (greedy list scheduling).
double makespan(const Runs& runs, int sms);

// Modelled walk time (us) of sequences of len[n] chunks, H heads, on the walk family w: plain (len_seg = 0) or
// segments of len_seg chunks (phase 1 in grid order, the scan, phase 3). When a lower bound of it (work / SMs or the
// longest CTA, per phase) is already >= bound, that lower bound is returned instead.
double walk_model_us(const std::vector<int64_t>& len, int64_t H, const WalkCosts& w, int sms, int64_t len_seg,
                     double bound = 1e300);

// The automatic segment length in chunks (0: the plain walk) of sequences of len[n] chunks, H heads of size D, on
// sms SMs: none unless the plain walk's grid fits one wave (otherwise every SM already walks)
// and the longest sequence has 16 chunks or more; else the length of the best modelled time over 2 .. 64 segments of
// the longest sequence, kept only when it comes under WalkCosts::keep of the plain walk's model. 25-120 us of host
// time (the launcher caches it).
int64_t best_segment_chunks(const std::vector<int64_t>& len, int64_t H, int64_t D, int sms);

}  // namespace kimi::kda_plan
