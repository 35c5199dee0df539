// src/cuda/kda/kda.h: CUDA launchers of kimi/ops/kda.h (arguments already validated by the caller,
// same checks as the CPU path; tensors on one CUDA device, cu_seqlens on the host).
#pragma once

#include "kimi/context.h"
#include "kimi/ops/kda.h"

namespace kimi::cuda {

// Token-by-token KDA recurrence (decode, and the GPU reference). See src/cuda/kda/recurrent.cuh.
void kda_recurrent_fwd(const KdaArgs& a, const Context& ctx);

// The gate and beta activations (src/cuda/kda/gate.cuh).
void kda_gate(TensorView f, const KdaGate& gate, TensorView g, const Context& ctx);
void kda_beta(TensorView b, TensorView beta, const Context& ctx);

}  // namespace kimi::cuda
