// Implementation of src/verify/oracle/random.h, written from kimi/ops/random.h's definition.
#include "verify/oracle/random.h"

namespace kimi::oracle {

namespace {
__extension__ typedef unsigned __int128 u128;

uint64_t mix64(uint64_t z) {
  z ^= z >> 30;
  z *= 0xBF58476D1CE4E5B9ull;
  z ^= z >> 27;
  z *= 0x94D049BB133111EBull;
  z ^= z >> 31;
  return z;
}
// SplitMix64 started at state mix64(seed): the state advances by the golden gamma before each output.
std::vector<uint64_t> outputs(uint64_t seed, int64_t n) {
  std::vector<uint64_t> h;
  uint64_t state = mix64(seed);
  for (int64_t i = 0; i < n; ++i) {
    state += 0x9E3779B97F4A7C15ull;
    h.push_back(mix64(state));
  }
  return h;
}
}  // namespace

std::vector<double> fill_random_float(uint64_t seed, int64_t n, double lo, double hi) {
  const double w = double(float(hi - lo));
  std::vector<double> v;
  for (uint64_t h : outputs(seed, n)) v.push_back(lo + w * double(h >> 40) / 16777216.0);
  return v;
}

std::vector<int64_t> fill_random_int(uint64_t seed, int64_t n, int64_t lo, int64_t hi) {
  const u128 count = u128(hi - lo + 1);
  std::vector<int64_t> v;
  for (uint64_t h : outputs(seed, n)) v.push_back(lo + int64_t((h * count) >> 64));
  return v;
}

}  // namespace kimi::oracle
