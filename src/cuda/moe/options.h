// src/cuda/moe/options.h: the options of expert_path (src/cuda/moe/experts.h), the rule that picks how
// latent_moe runs its routed experts. Product code sets none: the defaults are the rule. Tests and benchmarks
// force one decode path on their thread with ScopedExpertPathOptions and read back, in ExpertPathRecord, what
// ran. Header-only host code, usable in every build.
#pragma once

#include <cstdint>

#include "core/scoped_options.h"

namespace kimi::cuda {

// The decode paths (T * top_k <= kGroupedMaxRowsPerExpert * E, experts.h):
//   touched:      ONE grouping launch that also lists the touched experts; the two FFMA expert launches have one
//                 grid row per touched expert (none for the untouched ones), and the shared expert rides in them
//                 when it can (no latent, the experts' shapes and format);
//   tensor_cores: four grouping launches, z gathered into bf16, the grouped wgmma GEMM over device-side M tiles
//                 (bf16 x with dense bf16 or MXFP4 experts only); the shared expert after them (cuda::mlp);
//   grouped:      four grouping launches; the two FFMA expert launches have one grid row per expert (a row of an
//                 expert without tokens exits at once); the shared expert after them (cuda::mlp).
// automatic: touched when T <= touched_max_tokens (and E <= kGroupMaxExperts, group.cuh), else tensor_cores where
// they apply, else grouped. A forced path applies to decode shapes only (prefill keeps its own rule); a forced
// `touched` with E > kGroupMaxExperts (the one-block grouping's bound) and a forced `tensor_cores` where they do
// not apply fall back to the automatic choice without the touched path.
enum class DecodeExpertPath { automatic, touched, tensor_cores, grouped };

// The touched path's register tile (touched.cuh, experts.cu launch_touched_mt):
//   in_flight: several chunks of each weight row in flight per lane (U = 4 at MT <= 2), 2-4 weight rows per lane,
//              warps splitting K chosen from K: the form measured 2.9x faster than the grouped path at T = 1;
//   streaming: the grouped kernels' tile (all warps split K, one chunk per row in flight, 4-8 weight rows per
//              lane: each x value loaded serves twice as many weight rows at MT >= 2);
//   automatic: in_flight at MT = 1 (T = 1: one row per touched expert), streaming above.
// The two tiles split K differently, so their sums may differ in the last bits; each is deterministic.
enum class TouchedTile { automatic, in_flight, streaming };

// The kernel of the tensor-core path (experts_wgmma) for its two launches:
//   warp_specialized: grouped_gemm_ws.cuh: one TMA producer warp and two wgmma consumer warpgroups over mbarriers,
//                     a persistent grid of one CTA per SM walking the tiles; only for STACKED dense bf16 experts
//                     (every projection at base + e * stride with the stride a positive multiple of 16 bytes, or one
//                     expert): its weight tensor maps span all experts;
//   cp_async:         grouped_gemm.cuh: every thread loads by cp.async, one CTA per tile; any layout, dense bf16
//                     or MXFP4 experts;
//   automatic:        warp_specialized where it applies, else cp_async.
// A forced warp_specialized where it does not apply throws kimi::Error naming the reason (no fallback). Both
// kernels run the same wgmma sequence per output element: the same results.
enum class GroupedGemmKernel { automatic, warp_specialized, cp_async };

// How cuda::mlp (the dense MLP, and the shared expert of latent_moe) forms h = act(x W1^T) * (x W3^T) on bf16 x:
//   fused:     glu_wgmma (experts.h): one grouped-GEMM launch with the GLU in its epilogue, h bf16 written once;
//   separate:  two cuBLAS GEMMs into f32 g and u, then glu_kernel over them (h rounded once too);
//   automatic: fused where glu_wgmma_applies (the format, and enough tiles to fill the device), else separate.
// A forced fused where the format does not apply throws kimi::Error (no fallback). Both paths round h once from
// fp32 sums; the sums' order differs, so they may differ in the last bit of h.
enum class MlpGluPath { automatic, fused, separate };

// latent_moe calls counted per expert path (and, on the touched path, per tile; on the tensor-core path, per
// kernel: experts_wgmma counts its calls; cuda::mlp's calls per GLU path) since the record was reset.
struct ExpertPathRecord {
  int64_t touched = 0, grouped = 0, wgmma = 0, gemm = 0;
  int64_t touched_in_flight = 0, touched_streaming = 0;
  int64_t wgmma_warp_specialized = 0, wgmma_cp_async = 0;
  int64_t mlp_fused = 0, mlp_separate = 0;  // cuda::mlp calls on bf16 x per MlpGluPath taken
};

struct ExpertPathOptions {
  DecodeExpertPath decode = DecodeExpertPath::automatic;
  // Tokens T up to which the automatic rule takes the touched path (0: never). On the H200 (graph replay, per
  // layer, `kimi_bench_moe decode`) the touched path is the fastest of the three at T = 1 .. 8 on both Kimi-Linear
  // (E 256, K 8: 0.079 ms at T = 1 against 0.134 on the tensor cores) and K3 (E 896, K 16, MXFP4), the tensor cores
  // from T = 16 (Kimi-Linear) / 32 (K3) (docs/ops/moe.md "The decode rule").
  int64_t touched_max_tokens = 8;
  TouchedTile touched_tile = TouchedTile::automatic;
  // Column tiles per block of the touched path's in-flight tile at T = 1 (touched.cuh: a block streams its tiles
  // with the next tile's first weight round issued before the current tile's reduction): 0 = automatic (the fewest
  // that fit the launch in one wave of blocks, experts.cu), 1 = one tile per block. Results do not depend on it.
  int touched_tiles_per_block = 0;
  GroupedGemmKernel grouped_gemm = GroupedGemmKernel::automatic;
  MlpGluPath mlp_glu = MlpGluPath::automatic;
  ExpertPathRecord* record = nullptr;  // where latent_moe counts the path it ran, or null
};

// While an object of this class lives, latent_moe on this thread uses these options (the innermost object
// wins; src/core/scoped_options.h). Not a process-wide setting: other threads keep the defaults.
using ScopedExpertPathOptions = ScopedOptions<ExpertPathOptions>;

// This thread's innermost ScopedExpertPathOptions, else the defaults.
inline const ExpertPathOptions& expert_path_options() { return ScopedExpertPathOptions::current(); }

}  // namespace kimi::cuda
