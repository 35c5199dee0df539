// src/cuda/mla/options.h: launch options of the MLA CUDA prefill (mla.h). The launcher picks the attention from the
// dtypes, layouts and head sizes (docs/ops/mla.md "CUDA implementation"); tests and benchmarks set
// MlaLaunchOptions to force the cuBLAS score blocks where the fused kernel would run, and read back in
// MlaLaunchRecord what ran. Product code sets none. Header-only host code, usable in every build.
#pragma once

#include <cstdint>

#include "core/scoped_options.h"

namespace kimi::cuda {

// mla_prefill with bf16 operands: the fused flash-attention kernel on wgmma (flash_wgmma.cuh, the default: 10-18%
// faster than the mma.sync form on the H200, docs/ops/mla.md), its mma.sync form (flash.cuh), its FlashAttention-3
// form (flash_fa3.cuh: TMA producer, pipelined and ping-ponged consumers; not the default until the H200 has timed
// it; it needs Dn, P, Dv multiples of 64 filling a kernel instance, else a forced fused_fa3 runs the wgmma form and
// is counted as such), or the cuBLAS score blocks (prefill_gemm.cu). A forced `fused`, `fused_wgmma` or `fused_fa3`
// still needs inputs the fused kernels take (mla.h mla_flash_supported); otherwise the blocks run.
enum class MlaPrefillPath { automatic, fused, fused_wgmma, fused_fa3, blocks };

// Calls counted per attention form since the record was reset.
struct MlaLaunchRecord {
  int64_t prefill_fused = 0;        // bf16, fused kernel on mma.sync (flash.cuh)
  int64_t prefill_fused_wgmma = 0;  // bf16, fused kernel on wgmma (flash_wgmma.cuh)
  int64_t prefill_fused_fa3 = 0;    // bf16, fused kernel on wgmma, FlashAttention-3 form (flash_fa3.cuh)
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
