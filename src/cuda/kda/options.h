// src/cuda/kda/options.h: launch options of the KDA CUDA entry points (kda.h, chunk.h). Each launcher picks its
// kernels from the shapes and the device (docs/ops/kda.md "CUDA kernels" has the table); tests and benchmarks pass
// KdaLaunchOptions to force one family where the inputs allow it and to read back, in KdaLaunchRecord, what ran.
// Product code passes none. Header-only host code, usable in every build, so the conformance cases set them
// whatever backends are linked.
#pragma once

#include <cstdint>

#include "core/scoped_options.h"

namespace kimi::cuda {

// The prep's row loads (prep.cuh, phase L): tensor-map copies of whole row tiles (q, k, v, g bf16 with 16-byte
// aligned rows), vector loads (bf16, 8-byte aligned row pieces) or the generic per-element loads.
enum class KdaRowLoads { bulk, vector, generic };

// kda_recurrent_fwd with T = 1 and no cu_seqlens: the streaming one-token kernels (recurrent_stream.cuh) or the
// staged ones (recurrent.cuh). A forced `streaming` still needs states the streaming kernels can read (recurrent.cu
// use_stream); otherwise the staged kernels run.
enum class KdaOneTokenPath { automatic, streaming, staged };

// kda_decode_step: the bulk kernels (the head's state block through shared memory, decode_step.cuh) or the register
// kernels. A forced `bulk` still needs a pool the bulk kernels can read (decode_step.cu use_bulk).
enum class KdaDecodePath { automatic, bulk, registers };

// What the calls that got this record ran. kda_chunk_fwd sets the first three fields (its last call); the others count
// calls.
struct KdaLaunchRecord {
  int64_t segment_chunks = 0;                    // kda_chunk_fwd: segment length in chunks (0: the plain walk)
  KdaRowLoads row_loads = KdaRowLoads::generic;  // kda_chunk_fwd: the prep's row loads
  bool o_staged = false;  // kda_chunk_fwd: O stored from walk_rs.cuh's O stage, else by per-element stores
  int64_t one_token_streaming = 0, one_token_staged = 0;  // kda_recurrent_fwd calls (T = 1) on each family
  int64_t decode_bulk = 0, decode_registers = 0;          // kda_decode_step calls on each family
};

struct KdaLaunchOptions {
  // kda_chunk_fwd's sequence parallelism (chunk.cuh "Segments"): 0 the cost model's choice
  // (src/cuda/kda/segment_plan.h), > 0 segments of that many 64-token chunks, < 0 never (the plain walk).
  int64_t segment_chunks = 0;
  KdaOneTokenPath one_token = KdaOneTokenPath::automatic;
  KdaDecodePath decode = KdaDecodePath::automatic;
  KdaLaunchRecord* record = nullptr;  // where the launcher says what it ran, or null
};

// For calls that reach the launchers through the kimi:: operators (the conformance cases of src/verify/cases): while an
// object of this class lives, a launcher called without options on this thread uses these (the innermost object
// wins; src/core/scoped_options.h). Not a process-wide setting: other threads keep the defaults.
using ScopedKdaLaunchOptions = ScopedOptions<KdaLaunchOptions>;

// The options of one launch: `given` where the caller passed them, else this thread's innermost
// ScopedKdaLaunchOptions, else the defaults.
inline const KdaLaunchOptions& kda_launch_options(const KdaLaunchOptions* given) {
  return given ? *given : ScopedKdaLaunchOptions::current();
}

}  // namespace kimi::cuda
