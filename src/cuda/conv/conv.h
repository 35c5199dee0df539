// src/cuda/conv/conv.h: CUDA launchers of kimi/ops/conv.h (arguments already validated).
#pragma once

#include <vector>

#include "kimi/context.h"
#include "kimi/ops/conv.h"
#include "kimi/tensor.h"

namespace kimi::cuda {

// short_conv_fwd: sequences n = 0 .. N-1 with token offsets (varlen: positions in the packed row of batch 0;
// else batch row n, offsets n*T); cache row rows[n] of cache_in / cache_out.
void short_conv_fwd(TensorView x, TensorView w, TensorView cache_in, TensorView cache_out,
                    const std::vector<int64_t>& offsets, bool varlen, const std::vector<int64_t>& rows,
                    ConvActivation act, TensorView y, const Context& ctx);

// short_conv_update: one token per sequence; `rows[n]` is sequence n's cache row (host values).
void short_conv_update(TensorView x, TensorView w, TensorView cache, const std::vector<int64_t>& rows,
                       ConvActivation act, TensorView y, const Context& ctx);

}  // namespace kimi::cuda
