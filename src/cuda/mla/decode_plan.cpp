// Implementation of src/cuda/mla/decode_plan.h.
#include "cuda/mla/decode_plan.h"

#include <algorithm>

namespace kimi::cuda::mla {

namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t tiles_of(int64_t max_len) { return std::max<int64_t>(1, ceil_div(max_len, kTcPlanTileRows)); }

// The fixed part of a CTA of H heads, in tiles (see the header).
double tc_c0(int64_t H, int64_t R, int64_t RP, int64_t esz) {
  const double tile_bytes = double(kTcPlanTileRows * RP * esz);
  const int64_t kp = ceil_div(RP, 16) * 16;  // the bf16 query row (decode_tc.cuh Qs)
  return 1.0 + 0.5 * double(H * kp * 2) / tile_bytes + 2.0 * double(H * R * 4) / tile_bytes;
}

double tc_cost(int64_t N, int64_t S, int64_t tiles, double c0, int64_t sms) {
  const int64_t waves = ceil_div(N * S, sms);
  return double(waves) * (double(ceil_div(tiles, S)) + c0);
}
}  // namespace

int64_t tc_decode_splits(int64_t N, int64_t max_len, int64_t H, int64_t R, int64_t RP, int64_t esz, int64_t sms) {
  const int64_t tiles = tiles_of(max_len);
  sms = std::max<int64_t>(1, sms);
  N = std::max<int64_t>(1, N);
  const double c0 = tc_c0(H, R, RP, esz);
  int64_t best = 1;
  double best_cost = 0;
  for (int64_t S = 1; S <= std::min<int64_t>(tiles, 4096); ++S) {
    const double cost = tc_cost(N, S, tiles, c0, sms);
    if (S == 1 || cost < best_cost) best = S, best_cost = cost;
  }
  return best;
}

TcDecodePlan tc_decode_plan(int64_t N, int64_t H, int64_t max_len, int64_t R, int64_t RP, int64_t esz, int64_t sms) {
  N = std::max<int64_t>(1, N);
  H = std::max<int64_t>(1, H);
  sms = std::max<int64_t>(1, sms);
  const int64_t tiles = tiles_of(max_len);
  const auto plan_for = [&](int64_t hg, double& cost) {
    const int64_t ctas = N * ceil_div(H, hg);
    const int64_t S = tc_decode_splits(ctas, max_len, hg, R, RP, esz, sms);
    cost = tc_cost(ctas, S, tiles, tc_c0(hg, R, RP, esz), sms);
    return TcDecodePlan{hg, S};
  };
  const int64_t hg0 = ceil_div(H, ceil_div(H, kTcPlanMaxHeads));
  double best_cost = 0;
  TcDecodePlan best = plan_for(hg0, best_cost);
  for (int64_t hg : {48, 32, 16}) {  // larger first: a smaller group must be strictly cheaper
    if (hg >= hg0) continue;
    double cost = 0;
    const TcDecodePlan p = plan_for(hg, cost);
    if (cost < best_cost) best = p, best_cost = cost;
  }
  return best;
}

int64_t decode_absorb_tokens(int64_t Dn) {
  return std::clamp<int64_t>((48 * 1024 / 4) / std::max<int64_t>(1, Dn), 1, 8);
}

int64_t decode_project_rows(int64_t Dv, int64_t H, int64_t token_blocks, int64_t sms) {
  const int64_t max_blocks = ceil_div(std::max<int64_t>(1, Dv), 16);  // row blocks of 16
  const int64_t base = std::max<int64_t>(1, H * token_blocks);
  const int64_t want = std::clamp<int64_t>(ceil_div(kProjWaves * std::max<int64_t>(1, sms), base), 1, max_blocks);
  return 16 * ceil_div(max_blocks, want);
}

int decode_merge_groups(int64_t S, int64_t units, int64_t H, int64_t N, int64_t sms) {
  int sg = S >= 8 ? 8 : S >= 4 ? 4 : S >= 2 ? 2 : 1;
  const auto ctas = [&](int g) { return std::max<int64_t>(1, N * H) * ceil_div(std::max<int64_t>(1, units), 256 / g); };
  while (sg > 1 && 256 / sg < units && ctas(sg) > kProjWaves * std::max<int64_t>(1, sms)) sg /= 2;
  return sg;
}

}  // namespace kimi::cuda::mla
