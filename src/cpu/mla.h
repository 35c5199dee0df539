// src/cpu/mla.h: CPU kernels of kimi/ops/mla.h (arguments already validated; index tensors already
// read on the host by the validation).
#pragma once

#include <vector>

#include "core/dims.h"
#include "kimi/context.h"
#include "kimi/ops/linear.h"
#include "kimi/tensor.h"

namespace kimi::cpu {

// cu: packed offsets [N+1] (B = 1), or empty for B independent rows of T tokens.
void mla_prefill(TensorView q, TensorView latent, TensorView k_pe, const Weight& w_kvb, TensorView gate,
                 const std::vector<int64_t>& cu, const MlaDims& d, TensorView o, const Context& ctx);
void mla_cache_write(TensorView latent, TensorView k_pe, TensorView cache, const std::vector<int64_t>& start,
                     const std::vector<int64_t>& slots, const Context& ctx);
void mla_decode(TensorView q, TensorView cache, const std::vector<int64_t>& lens, const std::vector<int64_t>& slots,
                const Weight& w_kvb, TensorView gate, const MlaDims& d, TensorView o, const Context& ctx);

}  // namespace kimi::cpu
