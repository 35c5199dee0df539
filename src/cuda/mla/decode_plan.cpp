// Implementation of src/cuda/mla/decode_plan.h.
#include "cuda/mla/decode_plan.h"

#include <algorithm>

namespace kimi::cuda::mla {

int64_t tc_decode_splits(int64_t N, int64_t max_len, int64_t H, int64_t R, int64_t RP, int64_t esz, int64_t sms) {
  const int64_t tiles = std::max<int64_t>(1, (max_len + kTcPlanTileRows - 1) / kTcPlanTileRows);
  sms = std::max<int64_t>(1, sms);
  N = std::max<int64_t>(1, N);
  const double tile_bytes = double(kTcPlanTileRows * RP * esz);
  const double c0 = 1.0 + 0.5 * double(H * RP * 4) / tile_bytes + 2.0 * double(H * R * 4) / tile_bytes;
  int64_t best = 1;
  double best_cost = 0;
  for (int64_t S = 1; S <= std::min<int64_t>(tiles, 4096); ++S) {
    const int64_t waves = (N * S + sms - 1) / sms;
    const double cost = double(waves) * (double((tiles + S - 1) / S) + c0);
    if (S == 1 || cost < best_cost) best = S, best_cost = cost;
  }
  return best;
}

}  // namespace kimi::cuda::mla
