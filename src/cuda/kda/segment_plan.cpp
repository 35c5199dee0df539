// Implementation of src/cuda/kda/segment_plan.h.
#include "cuda/kda/segment_plan.h"

#include <algorithm>
#include <iterator>
#include <map>

namespace kimi::kda_plan {

namespace {

// Cost model of walk_rs.cuh in microseconds per chunk of one CTA (one walk CTA per SM, one CTA per V tile of 64).
// kRsUs: a chunk with outputs (ncu, 1 x 65536 H32, 64 CTAs: 2.16 ms for 1024 chunks); kRsMapUs without them (a
// segment map: no O products), fit to a sweep of 11 segment lengths at 1 x 65536 H8 and H32 on the H200: the model
// within 4.5% of every measured walk time, 1.5% on average (tests/test_kda_segment_plan.cpp holds the measurements).
// kScanUs per sequential scan step (R_j staged from L2 + 128 x 16 fp32 FMA per thread), kLaunchUs per extra launch.
constexpr double kRsUs = 2.1, kRsMapUs = 0.8 * kRsUs;
constexpr double kScanUs = 8, kLaunchUs = 5;

}  // namespace

WalkCosts WalkCosts::of(int64_t D) { return WalkCosts{kRsUs, kRsMapUs, int(D / 64), 0.9}; }

void Runs::add(double cost, int64_t count) {
  if (cost <= 0 || count <= 0) return;
  if (!r.empty() && r.back().first == cost) r.back().second += count;
  else r.emplace_back(cost, count);
  work += cost * double(count);
  longest = std::max(longest, cost);
}

double Runs::lower_bound(int sms) const { return std::max(work / sms, longest); }

// The free times are kept as (time, SMs) pairs and advanced by whole rounds: a few microseconds per model on the host
// (a per-CTA heap cost up to 15 ms per call at H32 on the H200: the benchmark's 1 x 65536 H32 took 22.6 ms instead
// of 7.2 with the launcher's model in the way). The test checks it against the per-CTA list scheduling.
double makespan(const Runs& runs, int sms) {
  std::map<double, int64_t> free_at{{0.0, sms}};
  double end = 0;
  for (auto [c, m] : runs.r) {
    while (m > 0) {
      // the k SMs free first at t take whole rounds of k CTAs while they stay first (start <= the next time)
      const auto it = free_at.begin(), next = std::next(it);
      const double t = it->first;
      const int64_t k = it->second;
      int64_t rounds = m / k;
      if (next != free_at.end()) rounds = std::min(rounds, int64_t((next->first - t) / c) + 1);
      if (rounds >= 1) {
        free_at.erase(it);
        free_at[t + double(rounds) * c] += k;
        end = std::max(end, t + double(rounds) * c);
        m -= rounds * k;
      } else {  // fewer CTAs left than SMs free at t
        it->second -= m;
        free_at[t + c] += m;
        end = std::max(end, t + c);
        m = 0;
      }
    }
  }
  return end;
}

double walk_model_us(const std::vector<int64_t>& len, int64_t H, const WalkCosts& w, int sms, int64_t len_seg,
                     double bound) {
  Runs p1, p3;
  int64_t max_p = 1;
  const int nv = w.nv;
  for (const int64_t l : len) {
    if (len_seg <= 0) {
      p1.add(double(l) * w.full, H * nv);
      continue;
    }
    const int64_t P = std::max<int64_t>(1, (l + len_seg - 1) / len_seg);
    max_p = std::max(max_p, P);
    for (int64_t j = 0; j < P; ++j) {
      const double lj = double(std::min(len_seg, l - j * len_seg));
      // phase 1, per head: segment 0 its nv value CTAs (the nv identity CTAs return), a middle segment 2 nv
      // map CTAs, the last segment none; phase 3: segments j >= 1, nv CTAs per head
      if (j == 0) p1.add(lj * w.full, H * nv);
      else if (j < P - 1) p1.add(lj * w.map, H * 2 * nv);
      if (j > 0) p3.add(lj * w.full, H * nv);
    }
  }
  const double fixed = max_p > 1 ? double(std::max<int64_t>(0, max_p - 2)) * kScanUs + 2 * kLaunchUs : 0.0;
  const double lb = p1.lower_bound(sms) + p3.lower_bound(sms) + fixed;
  if (lb >= bound) return lb;
  return makespan(p1, sms) + (max_p > 1 ? makespan(p3, sms) : 0.0) + fixed;
}

int64_t best_segment_chunks(const std::vector<int64_t>& len, int64_t H, int64_t D, int sms) {
  const WalkCosts w = WalkCosts::of(D);
  if (int64_t(len.size()) * H * w.nv > sms) return 0;
  const int64_t lmax = len.empty() ? 0 : *std::max_element(len.begin(), len.end());
  if (lmax < 16) return 0;
  const double plain = walk_model_us(len, H, w, sms, 0);
  int64_t best = 0;
  double best_us = w.keep * plain;
  for (int64_t P = 2; P <= 64; ++P) {
    const int64_t L = (lmax + P - 1) / P;
    if (L < 2) break;
    const double t = walk_model_us(len, H, w, sms, L, best_us);
    if (t < best_us) best = L, best_us = t;
  }
  return best;
}

}  // namespace kimi::kda_plan
