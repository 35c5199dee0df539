// src/cuda/kda/chunk.h: CUDA launcher of kimi::kda_chunk_fwd (kimi/ops/kda.h), chunkwise KDA prefill on
// tensor cores (SPEC 5.1). Arguments already validated by the caller exactly as on the CPU; tensors on one
// CUDA device, cu_seqlens a host i32/i64 tensor (a device one is also accepted and copied back).
#pragma once

#include <cstdint>

#include "cuda/kda/options.h"
#include "kimi/context.h"
#include "kimi/ops/kda.h"

namespace kimi::cuda {

// K = V in {64, 128} (throws kimi::Error otherwise). The GPU always uses chunks of 64 tokens whatever
// chunk_size says: the chunk size changes only the rounding, not the math. See src/cuda/kda/chunk.cuh. options
// (tests, benchmarks; options.h): KdaLaunchOptions::segment_chunks forces or turns off the segments, and
// KdaLaunchOptions::record receives the segment length, the prep's row loads and the O epilogue of the call.
void kda_chunk_fwd(const KdaArgs& a, int chunk_size, const Context& ctx, const KdaLaunchOptions* options = nullptr);

}  // namespace kimi::cuda
