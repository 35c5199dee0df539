// src/verify/oracle/attn_res.h: fp64 oracle of SPEC 8 (Block Attention Residuals), written plainly.
#pragma once

#include <cstdint>
#include <vector>

namespace kimi::oracle {

// partial: [T, d]; blocks: n tensors [T, d]; proj_w, norm_w: [d]. Returns out [T, d]:
// V = (blocks..., partial); Kn = V / sqrt(mean(V^2) + eps); s = sum_d Kn * norm_w * proj_w;
// p = softmax(s) over the n+1 candidates; out = sum p V.
std::vector<double> attn_res(const std::vector<double>& partial, const std::vector<std::vector<double>>& blocks,
                             const std::vector<double>& proj_w, const std::vector<double>& norm_w, int64_t T,
                             int64_t d, double eps);

}  // namespace kimi::oracle
