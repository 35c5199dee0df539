// bench/dist/plan_stats.cpp (kimi_bench_ep_plan): the EP planner on K3-shaped steps (docs/ep.md).
// E = 896 routed experts, top-16, S = 256 tokens per rank, N in {16, 32, 64} ranks; each rank's routing draws
// 16 distinct experts per token from a Zipf law (weight 1/(i+1)^s over a fixed random permutation of experts).
// Per N and placement (round-robin; from a routing profile, the mean pairs per expert of 4 calibration steps, with
// R replicas dealt by water-filling) and plan policy (any: any rank computes
// any expert; held: only an expert's holders, PlanPolicy::holders_only), over `steps` steps:
//   worst home load / mean   the slowest rank without redundancy, relative to perfect balance P/N
//   balanced max / mean      after planning: ceil(P/N) / (P/N) (any), the restricted optimum L* / (P/N) (held)
//   moved %                  pairs computed off their holder (the dispatch traffic the balance costs)
//   shares                   replica shares (moved segments) per step, mean and max
//   plan us                  one rank's planner time per layer: plan_step + its dispatch and receive layouts
//                            (median; host, one thread)
//   send MB                  rank 0's dispatch bytes to other ranks per layer, bf16 latent rows (Dl = 3584): one
//                            row per pair (what EpMoe sends), and once per (token, destination rank) (SPEC 9's
//                            dedup, not implemented: the saving it would bring)
// Usage: kimi_bench_ep_plan [zipf_s=1.0] [steps=20]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "dist/layout.h"
#include "dist/planner.h"

namespace {

using namespace kimi::dist;

constexpr int kExperts = 896, kTopK = 16, kLatent = 3584;
constexpr int64_t kTokens = 256;

std::vector<int32_t> route(std::mt19937_64& rng, std::discrete_distribution<int32_t>& draw,
                           const std::vector<int32_t>& perm) {
  std::vector<int32_t> ids;
  ids.reserve(size_t(kTokens * kTopK));
  std::vector<char> used(kExperts);
  for (int64_t t = 0; t < kTokens; ++t) {
    std::fill(used.begin(), used.end(), 0);
    for (int j = 0; j < kTopK; ++j) {
      int32_t e;
      do e = perm[size_t(draw(rng))]; while (used[size_t(e)]);
      used[size_t(e)] = 1;
      ids.push_back(e);
    }
  }
  return ids;
}

void run(int n, double zipf_s, int steps, bool profile, int replicas, PlanPolicy policy) {
  std::mt19937_64 rng(42 + uint64_t(n));
  std::vector<double> w(kExperts);
  for (int i = 0; i < kExperts; ++i) w[size_t(i)] = 1.0 / std::pow(double(i + 1), zipf_s);
  std::discrete_distribution<int32_t> draw(w.begin(), w.end());
  std::vector<int32_t> perm(kExperts);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  // The routing profile: mean pairs per expert over 4 calibration steps (routings drawn like the measured ones).
  std::vector<double> prof(kExperts, 0.0);
  for (int cal = 0; cal < 4 * n; ++cal)
    for (int32_t e : route(rng, draw, perm)) prof[size_t(e)] += 1.0 / 4;
  const Placement pl = profile ? Placement::from_profile(n, prof, replicas) : Placement::round_robin(n, kExperts);
  const int64_t recv_cap = policy == PlanPolicy::any_rank ? kTokens * kTopK : int64_t(n) * kTokens * kTopK;
  double worst = 0, moved = 0, shares = 0, max_shares = 0, balanced = 0, send_rows = 0, dedup_rows = 0;
  std::vector<double> us;
  for (int step = 0; step < steps; ++step) {
    std::vector<std::vector<int32_t>> ids;
    std::vector<int64_t> counts;
    for (int r = 0; r < n; ++r) {
      ids.push_back(route(rng, draw, perm));
      std::vector<int64_t> c(kExperts, 0);
      for (int32_t e : ids.back()) ++c[size_t(e)];
      counts.insert(counts.end(), c.begin(), c.end());
    }
    const auto t0 = std::chrono::steady_clock::now();
    const StepPlan plan = plan_step(pl, counts, policy);
    const DispatchLayout dl = dispatch_layout(plan, 0, ids[0], kTopK, kTokens * kTopK);
    const ReceiveLayout rl = receive_layout(plan, 0, recv_cap);
    const auto t1 = std::chrono::steady_clock::now();
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    const double mean = double(plan.total_pairs) / n;
    worst += double(*std::max_element(plan.home_load.begin(), plan.home_load.end())) / mean;
    balanced += double(*std::max_element(plan.load.begin(), plan.load.end())) / mean;
    moved += 100.0 * double(plan.moved_pairs) / double(plan.total_pairs);
    shares += double(plan.moved_segments);
    max_shares = std::max(max_shares, double(plan.moved_segments));
    if (dl.send_slot.size() + rl.grouped_from.size() == 0) std::printf("(empty)\n");
    // Rank 0's rows to other ranks: per pair, and per (token, destination).
    std::vector<int32_t> dest(dl.send_slot.size());
    for (int d = 0; d < n; ++d)
      for (int64_t i = 0; i < dl.send_counts[size_t(d)]; ++i)
        dest[size_t(dl.send_slot[size_t(dl.send_displs[size_t(d)] + i)])] = d;
    for (int64_t t = 0; t < kTokens; ++t) {
      std::vector<int32_t> ds(dest.begin() + t * kTopK, dest.begin() + (t + 1) * kTopK);
      send_rows += double(std::count_if(ds.begin(), ds.end(), [](int32_t d) { return d != 0; }));
      std::sort(ds.begin(), ds.end());
      ds.erase(std::unique(ds.begin(), ds.end()), ds.end());
      dedup_rows += double(std::count_if(ds.begin(), ds.end(), [](int32_t d) { return d != 0; }));
    }
  }
  std::sort(us.begin(), us.end());
  const double mb = double(kLatent) * 2.0 / 1e6 / steps;  // bf16 row bytes, per step, in MB
  const std::string name = profile ? "profile+" + std::to_string(replicas / n) + "N" : "round-robin";
  std::printf("%4d  %-12s  %-4s  %8.3f  %8.4f  %7.2f  %7.1f  %5.0f  %9.0f  %7.1f  %7.1f\n", n, name.c_str(),
              policy == PlanPolicy::any_rank ? "any" : "held", worst / steps, balanced / steps, moved / steps,
              shares / steps, max_shares, us[us.size() / 2], send_rows * mb, dedup_rows * mb);
}

}  // namespace

int main(int argc, char** argv) {
  const double zipf_s = argc > 1 ? std::atof(argv[1]) : 1.0;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 20;
  std::printf("K3 EP plan: E %d, top-%d, %lld tokens/rank, Zipf s = %.2f, %d steps\n", kExperts, kTopK,
              static_cast<long long>(kTokens), zipf_s, steps);
  std::printf("   N  placement     plan  worst/mean  bal/mean  moved%%   shares  max     plan us  send MB  dedup MB\n");
  for (int n : {16, 32, 64}) {
    run(n, zipf_s, steps, false, 0, PlanPolicy::any_rank);
    run(n, zipf_s, steps, true, 2 * n, PlanPolicy::any_rank);
    for (int r : {0, 1, 2, 4}) run(n, zipf_s, steps, true, r * n, PlanPolicy::holders_only);
  }
  return 0;
}
