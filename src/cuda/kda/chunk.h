// src/cuda/kda/chunk.h: CUDA launcher of kimi::kda_chunk_fwd (kimi/ops/kda.h), chunkwise KDA prefill on
// tensor cores (SPEC 5.1). Arguments already validated by the caller exactly as on the CPU; tensors on one
// CUDA device, cu_seqlens a host i32/i64 tensor (a device one is also accepted and copied back).
#pragma once

#include <cstdint>

#include "kimi/context.h"
#include "kimi/ops/kda.h"

namespace kimi::cuda {

// K = V in {64, 128} (throws kimi::Error otherwise). The GPU always uses chunks of 64 tokens whatever
// chunk_size says: the chunk size changes only the rounding, not the math. See src/cuda/kda/chunk.cuh.
void kda_chunk_fwd(const KdaArgs& a, int chunk_size, const Context& ctx);

// Sequence parallelism (chunk.cuh, "Segments"), for tests and benchmarks; process-wide, not thread-safe
// against concurrent calls. chunks = 0: automatic (the default); > 0: always segments of that many chunks
// (64 tokens each); < 0: never. kda_chunk_last_segment_chunks: the segment length the last call used (0: the
// plain walk).
void kda_chunk_set_segment_chunks(int64_t chunks);
int64_t kda_chunk_last_segment_chunks();

// The prep's row loads the last call used (prep.cuh, phase L), for tests: the bulk copies (tensor-map copies of
// row tiles: q, k, v, g bf16 with 16-byte aligned rows), the vector loads (bf16, 8-byte aligned row pieces) or the
// generic loads.
enum class KdaRowLoads { bulk, vector, generic };
KdaRowLoads kda_chunk_last_row_loads();

// The walk kernel (chunk.cuh kernel 2 at V tiles of 32; walk_wgmma.cuh at 64; walk_rs.cuh at 64, the register-A
// form, the automatic choice for a bf16 o with 16-byte aligned rows), for tests and benchmarks: kda_chunk_set_walk
// forces the plain walk's kernel (automatic, the default: chunk.cu's heuristic; a forced one still gives way to
// segments where those are chosen, see kda_chunk_set_segment_chunks); kda_chunk_last_walk says which kernel the last
// call ran (segments: the sequence-parallel walks on chunk.cuh's VT = 32 walk; segments_rs: on walk_rs.cuh, taken
// where walk_rs.cuh is the plain walk, automatic or forced). Process-wide, like the segment setting.
enum class KdaWalk { automatic, mma_vt32, wgmma_vt64, segments, wgmma_rs, segments_rs };
void kda_chunk_set_walk(KdaWalk walk);
KdaWalk kda_chunk_last_walk();

}  // namespace kimi::cuda
