// src/verify/oracle/conv.h: fp64 oracle of SPEC 4 (short causal depthwise convolution with a decode
// cache), written plainly from the spec. Row-major vectors.
#pragma once

#include <cstdint>
#include <vector>

namespace kimi::oracle {

struct ConvResult {
  std::vector<double> y;      // [total, C]
  std::vector<double> cache;  // [N, C, W-1]: the last W-1 inputs of each sequence, oldest first
};

// x: [total, C], the tokens of N sequences one after the other (lens[n] tokens each);
// w: [C, W]; cache_in: [N, C, W-1] or nullptr (zeros before every sequence).
// y[t, c] = act(sum_{j=0..W-1} w[c, j] * input(t - (W-1) + j, c)), where input(k) for k < 0 (before the
// sequence) is cache_in[n, c, W-1+k].
ConvResult short_conv(const std::vector<double>& x, const std::vector<int64_t>& lens, int64_t C,
                      const std::vector<double>& w, int64_t W, const std::vector<double>* cache_in, bool silu);

}  // namespace kimi::oracle
