// src/cpu/kda.h: CPU kernels of kimi/ops/kda.h and kimi/ops/kda_decode.h (arguments already validated by
// src/ops/kda.cpp, src/ops/kda_decode.cpp; sizes resolved in core/dims.h).
#pragma once

#include <cstdint>
#include <vector>

#include "core/dims.h"
#include "kimi/context.h"
#include "kimi/ops/kda.h"
#include "kimi/ops/kda_decode.h"
#include "kimi/tensor.h"

namespace kimi::cpu {

void kda_gate(TensorView f, const KdaGate& gate, TensorView g, const Context& ctx);
void kda_beta(TensorView b, TensorView beta, const Context& ctx);
void kda_recurrent_fwd(const KdaArgs& args, const KdaDims& d, const Context& ctx);
void kda_chunk_fwd(const KdaArgs& args, const KdaDims& d, int chunk_size, const Context& ctx);
// The decode step as its parts (src/cpu/kda_decode.cpp); rows: sequence n's state / cache pool row.
void kda_decode_step(const KdaDecodeArgs& a, const std::vector<int64_t>& rows, const Context& ctx);

}  // namespace kimi::cpu
