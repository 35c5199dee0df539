// src/cpu/kda.h: CPU kernels of kimi/ops/kda.h (arguments already validated by src/ops/kda.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "kimi/context.h"
#include "kimi/ops/kda.h"
#include "kimi/tensor.h"

namespace kimi::cpu {

// One sequence of a (possibly packed) batch: batch row b, tokens [t0, t0 + len) of that row.
struct KdaSeq {
  int64_t b, t0, len;
};

// Sizes resolved by the validation: N = seqs.size(), scale already defaulted; sequence n's state is
// row state_rows[n] of initial_state / final_state (n itself without state_slots).
struct KdaDims {
  int64_t B, T, H, K, V;
  float scale;
  std::vector<KdaSeq> seqs;
  std::vector<int64_t> state_rows;
};

void kda_gate(TensorView f, const KdaGate& gate, TensorView g, const Context& ctx);
void kda_beta(TensorView b, TensorView beta, const Context& ctx);
void kda_recurrent_fwd(const KdaArgs& args, const KdaDims& d, const Context& ctx);
void kda_chunk_fwd(const KdaArgs& args, const KdaDims& d, int chunk_size, const Context& ctx);

}  // namespace kimi::cpu
