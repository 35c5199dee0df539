// src/cuda/mla/options.h: launch options of the MLA CUDA prefill (mla.h). The launcher picks the attention from the
// dtypes, layouts and head sizes (docs/ops/mla.md "CUDA implementation"); tests and benchmarks set
// MlaLaunchOptions to force the cuBLAS score blocks where the fused kernel would run, and read back in
// MlaLaunchRecord what ran. Product code sets none. Header-only host code, usable in every build.
#pragma once

#include <cstdint>

#include "core/scoped_options.h"

namespace kimi::cuda {

// mla_prefill with bf16 operands: `automatic` runs the FlashAttention-3 kernel (flash_fa3.cuh: wgmma, TMA producer,
// pipelined and ping-ponged consumers; 1.6-1.9x the plain wgmma form on the H200, docs/ops/mla.md) where its head
// sizes fit (Dn, P, Dv multiples of 64 filling a kernel instance: Kimi's 128 / 64 / 128), else the fused mma.sync
// kernel (flash.cuh, any head sizes that are multiples of 8), else the cuBLAS score blocks (prefill_gemm.cu).
// `fused` forces flash.cuh, `fused_fa3` flash_fa3.cuh (an Error on head sizes it cannot take), `blocks` the score
// blocks. A forced fused form on inputs no fused kernel takes (mla.h mla_flash_supported) runs the blocks.
enum class MlaPrefillPath { automatic, fused, fused_fa3, blocks };

// Calls counted per attention form since the record was reset.
struct MlaLaunchRecord {
  int64_t prefill_fused = 0;        // bf16, fused kernel on mma.sync (flash.cuh)
  int64_t prefill_fused_fa3 = 0;    // bf16, FlashAttention-3 kernel on wgmma (flash_fa3.cuh)
  int64_t prefill_blocks = 0;  // bf16, cuBLAS score blocks (prefill_gemm.cu)
  int64_t prefill_ffma = 0;    // other dtypes, fp32 FFMA (prefill.cuh)
};

struct MlaLaunchOptions {
  MlaPrefillPath prefill = MlaPrefillPath::automatic;
  MlaLaunchRecord* record = nullptr;  // where the launcher says what it ran, or null
};

// For calls through the kimi:: operators: while an object of this class lives, the MLA launchers on this thread use
// these options (the innermost object wins; src/core/scoped_options.h). Not a process-wide setting: other threads
// keep the defaults.
using ScopedMlaLaunchOptions = ScopedOptions<MlaLaunchOptions>;

// This thread's innermost ScopedMlaLaunchOptions, else the defaults.
inline const MlaLaunchOptions& mla_launch_options() { return ScopedMlaLaunchOptions::current(); }

}  // namespace kimi::cuda
