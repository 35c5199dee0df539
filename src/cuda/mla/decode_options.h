// src/cuda/mla/decode_options.h: which kernels the CUDA mla_decode runs (decode.cuh: fp32 FFMA; decode_tc.cuh: bf16
// tensor cores by mma.sync; decode_wg.cuh: bf16 tensor cores by warpgroup MMA). The launcher picks by the operands
// (mla.cu mla_decode; docs/ops/mla.md "CUDA decode"); tests and benchmarks force one family on their thread with
// ScopedMlaDecodePath and read back, in MlaDecodeRecord, what ran.
// Benchmarks also stop the op after its first stages (MlaDecodeStages) to time each kernel as a difference of times.
// Product code sets none. Header-only host code, usable in every build.
#pragma once

#include <cstdint>

#include "core/scoped_options.h"

namespace kimi::cuda {

// automatic: tensor cores where q is bf16 and the cache f32 or bf16 (and the shapes fit decode_tc.cuh), else FFMA.
// tensor_cores: wherever the shapes and the cache dtype fit decode_tc.cuh (also for f32 / f16 q), else FFMA.
// ffma: always the fp32 FFMA kernels.
// wgmma: as tensor_cores, with the attend on warpgroup MMA (decode_wg.cuh) where it fits (bf16 cache, R 512, P 64;
//   decode_wg.h wg_attend_fits), else decode_tc.cuh's. Not yet any automatic choice (its speed is unmeasured).
enum class MlaDecodePath { automatic, tensor_cores, ffma, wgmma };

// all: the whole op. absorb: only the absorb (with the lens / slots table); absorb_attend: the absorb and the attend.
// The stopped forms leave o unwritten: for benchmarks only (the attend's time = t(absorb_attend) - t(absorb), the
// merge + project's = t(all) - t(absorb_attend)).
enum class MlaDecodeStages { all, absorb, absorb_attend };

struct MlaDecodeRecord {
  int64_t tensor_cores = 0, ffma = 0;  // mla_decode calls (N >= 1) on each family
  int64_t wgmma = 0;                   // of the tensor_cores calls, those whose attend ran decode_wg.cuh
  int64_t splits = 0;                  // the last call's splits per sequence
  int64_t head_group = 0;              // the last call's heads per attend CTA (tensor cores; 0 for FFMA)
  int64_t merges = 0;                  // calls that ran the merge kernel (S > 1)
};

// What mla_decode runs on this thread (the defaults: automatic, no record, the whole op).
struct MlaDecodeOptions {
  MlaDecodePath path = MlaDecodePath::automatic;
  MlaDecodeRecord* record = nullptr;  // where mla_decode counts what it ran, or null
  MlaDecodeStages stages = MlaDecodeStages::all;
};

// While an object lives, mla_decode calls on this thread use `path` and `stages` and count into `record` (when not
// null); the innermost object wins (src/core/scoped_options.h). Not a process-wide setting: other threads keep the
// defaults.
class ScopedMlaDecodePath : public ScopedOptions<MlaDecodeOptions> {
 public:
  explicit ScopedMlaDecodePath(MlaDecodePath path, MlaDecodeRecord* record = nullptr,
                               MlaDecodeStages stages = MlaDecodeStages::all)
      : ScopedOptions(MlaDecodeOptions{.path = path, .record = record, .stages = stages}) {}
};

// This thread's innermost ScopedMlaDecodePath's settings (automatic / null / all without one).
inline MlaDecodePath mla_decode_path() { return ScopedOptions<MlaDecodeOptions>::current().path; }
inline MlaDecodeRecord* mla_decode_record() { return ScopedOptions<MlaDecodeOptions>::current().record; }
inline MlaDecodeStages mla_decode_stages() { return ScopedOptions<MlaDecodeOptions>::current().stages; }

}  // namespace kimi::cuda
