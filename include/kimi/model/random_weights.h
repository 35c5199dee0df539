// kimi/model/random_weights.h: the values random weights take, per checkpoint tensor (SPEC 11 names), in
// ranges that keep a random model's activations and logits O(1): one rule for `kimi random-model` (which
// writes them to safetensors, drawn from std::mt19937_64) and Model::random (which makes them where they live
// with fill_random, kimi/ops/random.h). The two generators differ, the distributions are the same.
//   weights (bf16)           uniform in +-sqrt(3 / in)  (unit-variance outputs for unit-variance inputs)
//   norm weights (bf16)      1 + uniform in +-0.1
//   A_log (f32)              uniform in [-1, 0) for the first H entries; the padding (K3's [128]) stays 0
//   dt_bias (f32)            uniform in [-1, 1)
//   conv1d weights (f32)     uniform in +-0.5
//   o_norm (f32)             1 + uniform in +-0.1
//   router bias (f32)        uniform in +-0.05
//   MXFP4 packed codes (u8)  uniform on [0, 255]
//   MXFP4 scales (u8, E8M0)  uniform on {e0 - 1, e0}, 2^(e0 - 127) ~ 0.5 / sqrt(in): E2M1 magnitudes average ~2,
//                            so outputs stay O(1)
#pragma once

#include <cstdint>
#include <string>

#include "kimi/dtype.h"
#include "kimi/model/config.h"
#include "kimi/model/schema.h"

namespace kimi::model {

struct RandomInit {
  DType dtype = DType::bf16;  // the dtype random weights are stored in: bf16 (weights), f32 (parameters), u8
  int64_t count = 0;          // values drawn: the first `count` in row-major order; the rest are 0
  // float dtypes: value = offset + scale * u, u uniform in [-bound, bound). NOTE: bound and scale are kept
  // apart (the range alone would do) because random-model draws u with exactly this arithmetic: the
  // checkpoints it writes, and so the reference fixtures' checksums (tests/fixtures), stay bit-identical.
  float bound = 0.f, scale = 1.f, offset = 0.f;
  int lo = 0, hi = 0;  // u8: uniform integers in [lo, hi]

  // The value range [offset - scale * bound, offset + scale * bound] (integers: [lo, hi]).
  double min() const;
  double max() const;
};

// The rule for tensor s of config c's schema (checkpoint_schema).
RandomInit random_init(const TensorSpec& s, const Config& c);

// The seed of tensor `name` in a random model of seed `seed` (a hash of both): each tensor's values depend
// on its name only, not on the schema's order or on which other tensors exist.
uint64_t tensor_seed(uint64_t seed, const std::string& name);

}  // namespace kimi::model
