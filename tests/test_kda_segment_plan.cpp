// The cost model behind the CUDA chunkwise KDA walk's sequence parallelism (src/cuda/kda/segment_plan.h): host code,
// tested on every machine. makespan() against the per-CTA list scheduling it stands for; the model against the walk
// times measured on the H200 (runs 42-43 in the git history of docs/gpu: bench_kda_prefill, 1 x 65536 tokens, bf16,
// bounded gate, walk = total - the prep's time); the automatic choices the launcher makes on those shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <queue>
#include <random>
#include <vector>

#include "cuda/kda/segment_plan.h"

namespace kimi::kda_plan {
namespace {

constexpr int kH200Sms = 132;

// Greedy list scheduling one CTA at a time: each CTA, in grid order, starts on the SM free first.
double list_schedule(const Runs& runs, int sms) {
  std::priority_queue<double, std::vector<double>, std::greater<>> free_at;
  for (int i = 0; i < sms; ++i) free_at.push(0.0);
  double end = 0;
  for (const auto& [cost, count] : runs.r)
    for (int64_t i = 0; i < count; ++i) {
      const double t = free_at.top() + cost;
      free_at.pop();
      free_at.push(t);
      end = std::max(end, t);
    }
  return end;
}

TEST(KdaSegmentPlan, MakespanIsListScheduling) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    const int sms = 1 + int(rng() % 140);
    Runs runs;
    const int n = 1 + int(rng() % 6);
    // costs in quarters: every sum below is exact in binary, so both schedules must agree to the bit
    for (int i = 0; i < n; ++i) runs.add(0.25 * double(1 + rng() % 800), int64_t(rng() % 500));
    EXPECT_EQ(makespan(runs, sms), list_schedule(runs, sms)) << "trial " << trial << ", " << sms << " SMs";
  }
}

struct Measured {
  int64_t len_seg;  // 0: the plain walk
  double total_ms;  // bench_kda_prefill median, prep included
};

// Relative error of the model's walk time against the measurements of one shape, whose prep time is the plain walk's
// total minus the model's plain walk (the model's per-chunk cost was measured on the plain walk).
double worst_error(int64_t H, const std::vector<Measured>& runs) {
  const std::vector<int64_t> len{1024};  // 65536 tokens
  const WalkCosts w = WalkCosts::of(128);
  const double prep_ms = runs.front().total_ms - walk_model_us(len, H, w, kH200Sms, 0) / 1000;
  double worst = 0;
  for (const Measured& m : runs) {
    const double model_ms = walk_model_us(len, H, w, kH200Sms, m.len_seg) / 1000, walk_ms = m.total_ms - prep_ms;
    std::printf("[ segment plan H%lld, segments of %4lld chunks ] walk %.3f ms, model %.3f ms\n",
                static_cast<long long>(H), static_cast<long long>(m.len_seg), walk_ms, model_ms);
    worst = std::max(worst, std::abs(model_ms - walk_ms) / walk_ms);
  }
  return worst;
}

// The H200 sweep of segment lengths on walk_rs.cuh (bench_kda_prefill, git history of docs/gpu: run 43): the model within 5% of every measured walk time (4.5% at worst, 1.5% on average,
// with the map cost 0.8 x kRsUs; 0.7 x kRsUs, the estimate before the sweep, was 4.7% optimistic on average).
TEST(KdaSegmentPlan, ModelMatchesTheH200Sweep) {
  const std::vector<Measured> h8{{0, 2.650},   {40, 1.433},  {60, 1.339},  {80, 1.338},  {100, 1.517}, {114, 1.196},
                                 {128, 1.253}, {171, 1.446}, {205, 1.410}, {256, 1.599}, {342, 1.934}, {512, 2.624}};
  const std::vector<Measured> h32{{0, 4.043},   {40, 4.806},  {60, 4.700},  {80, 4.564},  {100, 4.647}, {128, 4.474},
                                  {171, 4.381}, {205, 4.114}, {256, 4.243}, {342, 3.751}, {512, 4.062}};
  EXPECT_LE(worst_error(8, h8), 0.05);
  EXPECT_LE(worst_error(32, h32), 0.05);
}

// The launcher's automatic choices on the benchmark shapes (H200, D = 128): the sweep's measured best where it
// has one.
TEST(KdaSegmentPlan, AutomaticChoices) {
  const std::vector<int64_t> one_long{1024};
  EXPECT_EQ(best_segment_chunks(one_long, 8, 128, kH200Sms), 114);  // measured best of 11 lengths
  EXPECT_EQ(best_segment_chunks(one_long, 32, 128, kH200Sms), 342);  // 3.751 ms against 4.043 plain
  // 1 x 16384 H64: 128 CTAs already busy on 132 SMs; 8 x 4096 H32: 512 CTAs, more than one wave
  EXPECT_EQ(best_segment_chunks({256}, 64, 128, kH200Sms), 0);
  EXPECT_EQ(best_segment_chunks(std::vector<int64_t>(8, 64), 32, 128, kH200Sms), 0);
  // sequences shorter than 16 chunks never split
  EXPECT_EQ(best_segment_chunks({15}, 1, 128, kH200Sms), 0);
  // a split pays more where fewer SMs are busy: fewer heads, shorter segments
  EXPECT_GT(best_segment_chunks(one_long, 32, 128, kH200Sms),
            best_segment_chunks(one_long, 8, 128, kH200Sms));
}

}  // namespace
}  // namespace kimi::kda_plan
