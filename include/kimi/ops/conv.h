// kimi/ops/conv.h: KDA's short causal depthwise convolution + SiLU, with its decode cache (SPEC 4).
//
//   y[t, c] = act( sum_{j=0..W-1} w[c, j] * x[t - (W-1) + j, c] )      act = SiLU (or identity)
// w[c, W-1] multiplies the current token. Inputs before a sequence's start come from the cache
// (or are zero without one).
//
// Cache layout (documented choice): [N, C, W-1] fp32/bf16/f16, the last W-1 INPUTS of each sequence
// per channel, oldest first (cache[n, c, W-2] is the most recent). W-1, not W: the current token is
// always the input itself. A sequence shorter than W-1 shifts its inputs into the old cache.
//
// Layouts: x, y [B, T, C] (or packed [1, total_T, C] with cu_seqlens i32/i64 [N+1]); last dim stride 1.
// w: [C, W] or the checkpoint's [C, 1, W] (f32/bf16/f16); W in [1, 8].
#pragma once

#include "kimi/context.h"
#include "kimi/tensor.h"

namespace kimi {

enum class ConvActivation : uint8_t { none, silu };

// Prefill. cache_in (optional) gives the W-1 inputs before each sequence; cache_out (optional)
// receives the last W-1 inputs (may be the cache_in view itself, exactly). N = B, or cu_seqlens' N;
// zero-length sequences pass cache_in through (zeros without it). cu_seqlens is read on the host.
// cache_slots (optional, i32/i64 [N], on the host, distinct): sequence n uses row cache_slots[n] of cache
// pools [N_c, C, W-1] (serving slots, as short_conv_update); other rows are untouched. Absent: row n.
// y must not overlap x (not in place). Caches may have any float dtype; prefill(T) == prefill(T-n)
// + n decode steps exactly when the cache dtype holds x's values exactly (x's dtype or f32).
void short_conv_fwd(TensorView x, TensorView w, TensorView cache_in, TensorView cache_out, TensorView cu_seqlens,
                    TensorView cache_slots, ConvActivation act, TensorView y, const Context& ctx = {});

// One decode step for N sequences: x, y [N, C]; cache [N, C, W-1] updated in place (may be absent
// only when W = 1). cache_slots (optional, i32/i64 [N], on the host) maps row n to cache row
// cache_slots[n] of a pool cache [N_c, C, W-1] (state pools); slots must be in [0, N_c) and distinct.
// y must not overlap x.
void short_conv_update(TensorView x, TensorView w, TensorView cache, TensorView cache_slots,
                       ConvActivation act, TensorView y, const Context& ctx = {});

}  // namespace kimi
