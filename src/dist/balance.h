// dist/balance.h: Quantile Balancing across ranks (SPEC 7), the router-bias update of kimi::moe_quantile_balance over
// the union of every rank's batch, from per-expert histograms merged with collectives (no scores leave a rank).
//
// Exact form (kimi/ops/moe.h, one process, T tokens): c_i = token i's (K+1)-th largest biased score s_ij + b_j;
// margins m_ij = s_ij + b_j - c_i; delta_j = the Hazen quantile at level 1 - K/E of expert j's T margins, i.e. the
// order statistics at 0-based position h = T - K T / E - 1/2 (clamped to [0, T-1]) interpolated by frac(h);
// b_j <- b_j - delta_j, then b <- b - mean(b).
// Distributed (T = sum of the ranks' T_r): c_i and the margins are local; per expert the global range
// [lo_j, hi_j] comes from one all_gather of the local minima and maxima; each rank counts its margins in B equal
// bins of that range; one all_reduce_sum merges the [E, B] counts. The order statistic at position k is read in
// its bin, assuming the bin's values spread evenly: lo + (bin + (k - before + 1/2) / count) * width. Each of the
// two order statistics is off by at most one bin width, so |delta_j - exact| <= (hi_j - lo_j) / B (B = 4096:
// 0.025% of the margin range; the seed asks for 1%). Every rank ends with the same bias.
// Cost: O(T_r E log K + E B) per rank; messages: 2 E doubles gathered per rank, E B int64 reduced.
#pragma once

#include <cstdint>

#include "dist/comm.h"
#include "kimi/tensor.h"

namespace kimi::dist {

struct QuantileBalanceStats {
  int64_t tokens = 0;       // T over all ranks
  double max_bin_width = 0; // max_j (hi_j - lo_j) / B: the bound on |delta_j - exact|
};

// scores f32 [T_r, E] (this rank's sigmoid router scores, unbiased, finite; T_r may be 0); bias f32 [E] (the same
// on every rank, finite), updated in place to the same value on every rank. Requires 1 <= K < E, bins >= 1.
// Collective. T = 0 over all ranks leaves the bias unchanged.
QuantileBalanceStats quantile_balance(Comm& comm, TensorView scores, TensorView bias, int top_k, int bins = 4096);

}  // namespace kimi::dist
