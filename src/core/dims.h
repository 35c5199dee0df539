// src/core/dims.h: the sizes an operator's validation resolves (src/ops) and hands to every backend.
//
// They are part of the backend interface (src/core/registry.h), so they belong to neither backend: the CPU
// kernels and the CUDA launchers read the same struct.
#pragma once

#include <cstdint>
#include <vector>

namespace kimi {

// One sequence of a (possibly packed) KDA batch: batch row b, tokens [t0, t0 + len) of that row.
struct KdaSeq {
  int64_t b, t0, len;
};

// kda_recurrent_fwd / kda_chunk_fwd: N = seqs.size(), scale already defaulted (1/sqrt(K)); sequence n's state
// is row state_rows[n] of initial_state / final_state (n itself without state_slots).
struct KdaDims {
  int64_t B, T, H, K, V;
  float scale;
  std::vector<KdaSeq> seqs;
  std::vector<int64_t> state_rows;
};

// mla_prefill / mla_decode: H heads, latent rank R = kv_lora, rope dim P = qk_rope, Dn = qk_nope, Dv = v_dim;
// every size cross-checked against the tensors, scale already defaulted (1/sqrt(Dn + P)).
struct MlaDims {
  int64_t heads = 0, kv_lora = 0, qk_rope = 0, qk_nope = 0, v_dim = 0;
  float scale = 0.f;
};

// fill_random (kimi/ops/random.h) as validation resolves it: the generator's start state mix64(seed); float
// dtypes: lo and width = hi - lo rounded to f32; integer dtypes: lo and the count hi - lo + 1 of values.
struct RandomFill {
  uint64_t state = 0;
  double lo = 0;
  float width = 0.f;
  uint64_t count = 0;
};

}  // namespace kimi
