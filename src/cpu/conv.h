// src/cpu/conv.h: CPU kernel of kimi/ops/conv.h (arguments already validated).
#pragma once

#include <cstdint>
#include <vector>

#include "kimi/context.h"
#include "kimi/ops/conv.h"
#include "kimi/tensor.h"

namespace kimi::cpu {

// One sequence: tokens x[b, t0 .. t0+len) (x, y are [B, T, C]); its cache row in cache_in/cache_out.
struct ConvSeq {
  int64_t b = 0, t0 = 0, len = 0, cache_row = 0;
};

// The causal depthwise conv of every sequence. Prefill and the decode step (len 1, cache_in ==
// cache_out) run this same code, so prefill(T) == prefill(T-n) + n decode steps bit for bit.
// cache_in / cache_out may be absent, or the same view (each (sequence, channel) reads its whole
// cache row before writing it). y must not overlap x (checked by the caller for the same pointer).
void short_conv(TensorView x, TensorView w, TensorView cache_in, TensorView cache_out,
                const std::vector<ConvSeq>& seqs, ConvActivation act, TensorView y, const Context& ctx);

}  // namespace kimi::cpu
