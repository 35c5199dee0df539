// src/cuda/kda/kda.h: CUDA launchers of kimi/ops/kda.h and kimi/ops/kda_decode.h (arguments already
// validated by the caller, same checks as the CPU path; tensors on one CUDA device, cu_seqlens on the host).
#pragma once

#include <cstdint>
#include <vector>

#include "cuda/kda/options.h"
#include "kimi/context.h"
#include "kimi/ops/kda.h"
#include "kimi/ops/kda_decode.h"

namespace kimi::cuda {

// Token-by-token KDA recurrence (decode, and the GPU reference). See src/cuda/kda/recurrent.cuh. options (tests,
// benchmarks; options.h): KdaLaunchOptions::one_token forces the one-token family for T = 1 without cu_seqlens.
void kda_recurrent_fwd(const KdaArgs& a, const Context& ctx, const KdaLaunchOptions* options = nullptr);

// The gate and beta activations (src/cuda/kda/gate.cuh).
void kda_gate(TensorView f, const KdaGate& gate, TensorView g, const Context& ctx);
void kda_beta(TensorView b, TensorView beta, const Context& ctx);

// The fused decode step, one launch (src/cuda/kda/decode_step.cuh). `host_rows`: sequence n's pool row when
// a.slots is absent or on the host (validated by the caller); unused when a.slots is a CUDA tensor (read by
// the kernel; a value outside [0, S) makes that sequence's y rows NaN and touches no pool row).
// Capturable in a CUDA graph unless a.slots is a host tensor of more than 256 rows (then uploaded). options (tests,
// benchmarks; options.h): KdaLaunchOptions::decode forces the bulk or the register kernels.
void kda_decode_step(const KdaDecodeArgs& a, const std::vector<int64_t>& host_rows, const Context& ctx,
                     const KdaLaunchOptions* options = nullptr);

}  // namespace kimi::cuda
