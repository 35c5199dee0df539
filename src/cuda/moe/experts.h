// src/cuda/moe/experts.h: the routed experts of latent_moe on grouped rows (src/cuda/moe/group.cuh), four paths
// the launcher chooses between on the host from T, the dtypes, the weight format and T * K / E (no counts on the
// host; expert_path, whose decode choice follows src/cuda/moe/options.h):
//   touched (decode, T <= touched_max_tokens, E <= kGroupMaxExperts): experts_touched, two launches over the
//     touched experts only (the device list of ExpertRows::active), the shared expert riding along when it can
//     (touched.cuh), no host synchronisation, capturable when stacked;
//   tensor cores (bf16 x; dense bf16 or MXFP4 experts, gate and up in one format; any row count): experts_wgmma,
//     one launch for gate+up+GLU and one for down over device-side M tiles (grouped_gemm.cuh), no host
//     synchronisation, capturable when stacked. On the H200 it beats the grouped FFMA kernels at every row count
//     measured (T = 1..512 at Kimi-Linear's shape: 33-76% of the copy rate on the touched experts' bytes against
//     11-62%; docs/ops/moe.md "Which path");
//   small rows otherwise (T * K <= kGroupedMaxRowsPerExpert * E: f32 / f16 activations or other weights at decode):
//     experts_grouped, two launches for every expert (grouped.cuh), no host synchronisation, capturable;
//   large rows otherwise: experts_gemm, the E + 1 offsets copied to the host (ONE stream sync), then per expert
//     with rows cuBLAS GEMMs on operands of the activation dtype.
// All write ye[r, :] = Expert_e(z[token_of_row[r], :]) (f32) for every grouped row r of every expert e.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "cuda/moe/options.h"
#include "kimi/context.h"
#include "kimi/dtype.h"
#include "kimi/ops/moe.h"

namespace kimi::cuda {

// Average routed rows per expert (T * K / E) at or below which latent_moe takes a decode path (touched, or grouped
// when neither the touched nor the tensor-core path applies).
// NOTE: the grouped kernels do MT-row FFMA work per streamed weight; at ~16 rows per expert that work reaches
// the H200's fp32 CUDA-core rate at its HBM rate, which is also linear's GEMV bound (kGemvMaxM): above it
// tensor-core GEMMs win even with the host round trip. To be tuned from measurements (docs/ops/moe.md).
inline constexpr int64_t kGroupedMaxRowsPerExpert = 16;

// Experts up to which the touched path's one-block grouping (group.cuh group_kernel) keeps its E int32 counts plus
// its static scan buffers within the default 48 KB of shared memory; larger E takes the grouped path.
inline constexpr int64_t kGroupMaxExperts = 12000;

// How the experts' weights reach the grouped kernels, decided on the host before anything is launched.
struct ExpertLayout {
  bool stacked = true;  // every projection evenly strided in memory (base + e * stride); else per-call tables
};

// Checks what the CUDA experts need (one intermediate size, one weight format per projection) and finds
// whether each projection is stacked. Throws kimi::Error naming the expert and the field.
ExpertLayout expert_layout(std::span<const MlpWeights> experts);

enum class ExpertPath { touched, grouped, wgmma, gemm };

// The path latent_moe takes for T tokens and T * K = slots routed rows over the experts, x of dtype x_dtype (the
// rule above; the decode choice from this thread's expert_path_options()).
ExpertPath expert_path(int64_t tokens, int64_t slots, DType x_dtype, std::span<const MlpWeights> experts);

// The device grouping of the T*K slots (group.cuh).
struct ExpertRows {
  const int32_t* offsets;       // [E + 1]
  const int32_t* token_of_row;  // [T*K]
  int64_t slots;                // T*K
  int64_t tokens;               // T (bounds the rows of one expert: a token routes to distinct experts)
  const int32_t* active = nullptr;    // [min(E, T*K)] touched experts ascending (group_kernel; the touched path)
  const int32_t* n_active = nullptr;  // [1] the number of touched experts (with active)
};

// z f32 [T, dl] (rows dl apart) -> ye f32 [T*K, dl] in grouped order. Uploads per-call pointer tables when the
// layout is not stacked (refused under graph capture by the launcher before any work).
void experts_grouped(const float* z, int64_t dl, std::span<const MlpWeights> experts, const ExpertLayout& layout,
                     const ExpertRows& rows, const GluParams& act, float* ye, cudaStream_t s);

// Tokens up to which experts_touched may run the shared expert in its own launches.
inline constexpr int64_t kTouchedMaxSharedTokens = 8;

// Whether experts_touched can take `shared` along (T <= kTouchedMaxSharedTokens, the shared projections of the
// routed experts' shapes and formats). The caller also needs z to be the shared expert's input (no latent).
bool touched_takes_shared(std::span<const MlpWeights> experts, const MlpWeights& shared, int64_t tokens);

// The same result over the touched experts only (rows.active and rows.n_active set, by group_kernel); with
// `shared` (touched_takes_shared) also ye[T*K + t] = Shared(z[t]) for t < T (ye then holds T*K + T rows).
// Uploads per-call pointer tables when the layout is not stacked (refused under capture by the launcher).
void experts_touched(const float* z, int64_t dl, std::span<const MlpWeights> experts, const ExpertLayout& layout,
                     const ExpertRows& rows, const GluParams& act, const MlpWeights* shared, float* ye,
                     cudaStream_t s);

// The grouped GEMM kernel experts_wgmma runs on these experts (options.h GroupedGemmKernel, resolved:
// warp_specialized or cp_async): warp_specialized for stacked dense bf16 experts unless cp_async is forced. Throws
// kimi::Error where warp_specialized is forced on experts it cannot take (before anything is launched).
GroupedGemmKernel grouped_gemm_kernel(std::span<const MlpWeights> experts, const ExpertLayout& layout);

// The same result on tensor cores (grouped_gemm.cuh, or grouped_gemm_ws.cuh: grouped_gemm_kernel): zg bf16 [T*K,
// dl] (grouped order) -> H bf16 [T*K, I] -> ye of dtype yt: f32, or bf16 (each element's fp32 sum rounded once:
// exactly bf16 of the f32 result). For the shapes expert_path sends here; uploads per-call pointer tables when the
// layout is not stacked.
void experts_wgmma(const void* zg, int64_t dl, std::span<const MlpWeights> experts, const ExpertLayout& layout,
                   const ExpertRows& rows, const GluParams& act, void* ye, DType yt, cudaStream_t s);

// Whether glu_wgmma takes the gate and up projections of `w` for x (options.h MlpGluPath; the automatic rule): x
// bf16 with rows a multiple of 8 elements apart and 16-byte aligned, gate and up dense bf16 (or both MXFP4) with
// wgmma_ok's widths and alignment, and (automatic) enough tiles to fill the device: ceil(M / 128) * ceil(I / 128)
// >= the SM count (below it cuBLAS's smaller tiles and split-K keep the SMs busy; decode's M <= 8 never fills).
// A forced `fused` where the format does not apply throws kimi::Error naming the reason.
bool glu_wgmma_applies(const TensorView& x, const MlpWeights& w);

// h bf16 [M, I] (rows I apart) = bf16(glu(x W1^T, x W3^T)) for x bf16 [M, k]: the dense / shared MLP's gate, up and
// GLU in ONE launch of the grouped GEMM (one group of M rows; a one-thread launch writes its offsets first: no host
// sync, capturable), instead of two f32 GEMM outputs and a GLU pass over them.
void glu_wgmma(const TensorView& x, const MlpWeights& w, const GluParams& act, void* h, cudaStream_t s);

// The same result through cuBLAS: zg [T*K, dl] (dtype op: bf16 or f32, grouped order) -> ye (the GLU output is
// rounded to op too). Copies the offsets to the host (a stream sync).
void experts_gemm(const void* zg, DType op, int64_t dl, std::span<const MlpWeights> experts, const ExpertRows& rows,
                  const GluParams& act, float* ye, const Context& ctx);

}  // namespace kimi::cuda
