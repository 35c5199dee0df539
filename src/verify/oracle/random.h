// src/verify/oracle/random.h: fill_random's values (kimi/ops/random.h), plainly from its definition:
// SplitMix64 outputs h_i, then the float or integer mapping, in fp64 / 128-bit integers.
#pragma once

#include <cstdint>
#include <vector>

namespace kimi::oracle {

// The first n values of a float fill (before the store's rounding to f32 / bf16): lo + w * k_i / 2^24 with
// w = hi - lo rounded to f32 and k_i the top 24 bits of h_i.
std::vector<double> fill_random_float(uint64_t seed, int64_t n, double lo, double hi);
// The first n values of an integer fill: lo + floor(h_i * (hi - lo + 1) / 2^64).
std::vector<int64_t> fill_random_int(uint64_t seed, int64_t n, int64_t lo, int64_t hi);

}  // namespace kimi::oracle
