// src/cuda/moe/experts.h: the routed experts of latent_moe on grouped rows (src/cuda/moe/group.cuh), three paths
// the launcher chooses between on the host from the dtypes, the weight format and T * K / E (no counts on the host):
//   tensor cores (bf16 x, dense bf16 experts, any row count): experts_wgmma, one launch for gate+up+GLU and one for
//     down over device-side M tiles (grouped_gemm.cuh), no host synchronisation, capturable when stacked. On the
//     H200 it beats the grouped FFMA kernels at every row count measured (T = 1..512 at Kimi-Linear's shape: 33-76%
//     of the copy rate on the touched experts' bytes against 11-62%; docs/ops/moe.md "Which path");
//   small rows otherwise (T * K <= kGroupedMaxRowsPerExpert * E: MXFP4 experts or f32 activations at decode):
//     experts_grouped, two launches for every expert (grouped.cuh), no host synchronisation, capturable;
//   large rows otherwise: experts_gemm, the E + 1 offsets copied to the host (ONE stream sync), then per expert
//     with rows cuBLAS GEMMs on operands of the activation dtype.
// All write ye[r, :] = Expert_e(z[token_of_row[r], :]) (f32) for every grouped row r of every expert e.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "kimi/context.h"
#include "kimi/ops/moe.h"

namespace kimi::cuda {

// Average routed rows per expert (T * K / E) at or below which latent_moe takes the grouped (decode) path when the
// tensor-core path does not apply.
// NOTE: the grouped kernels do MT-row FFMA work per streamed weight; at ~16 rows per expert that work reaches
// the H200's fp32 CUDA-core rate at its HBM rate, which is also linear's GEMV bound (kGemvMaxM): above it
// tensor-core GEMMs win even with the host round trip. To be tuned from measurements (docs/ops/moe.md).
inline constexpr int64_t kGroupedMaxRowsPerExpert = 16;

// How the experts' weights reach the grouped kernels, decided on the host before anything is launched.
struct ExpertLayout {
  bool stacked = true;  // every projection evenly strided in memory (base + e * stride); else per-call tables
};

// Checks what the CUDA experts need (one intermediate size, one weight format per projection) and finds
// whether each projection is stacked. Throws kimi::Error naming the expert and the field.
ExpertLayout expert_layout(std::span<const MlpWeights> experts);

enum class ExpertPath { grouped, wgmma, gemm };

// The path latent_moe takes for T * K = slots routed rows over the experts, x of dtype x_dtype (the rule above).
ExpertPath expert_path(int64_t slots, DType x_dtype, std::span<const MlpWeights> experts);

// The device grouping of the T*K slots (group.cuh).
struct ExpertRows {
  const int32_t* offsets;       // [E + 1]
  const int32_t* token_of_row;  // [T*K]
  int64_t slots;                // T*K
  int64_t tokens;               // T (bounds the rows of one expert: a token routes to distinct experts)
};

// z f32 [T, dl] (rows dl apart) -> ye f32 [T*K, dl] in grouped order. Uploads per-call pointer tables when the
// layout is not stacked (refused under graph capture by the launcher before any work).
void experts_grouped(const float* z, int64_t dl, std::span<const MlpWeights> experts, const ExpertLayout& layout,
                     const ExpertRows& rows, const GluParams& act, float* ye, cudaStream_t s);

// The same result on tensor cores (grouped_gemm.cuh): zg bf16 [T*K, dl] (grouped order) -> H bf16 [T*K, I] ->
// ye. For the shapes expert_path sends here; uploads per-call pointer tables when the layout is not stacked.
void experts_wgmma(const void* zg, int64_t dl, std::span<const MlpWeights> experts, const ExpertLayout& layout,
                   const ExpertRows& rows, const GluParams& act, float* ye, cudaStream_t s);

// The same result through cuBLAS: zg [T*K, dl] (dtype op: bf16 or f32, grouped order) -> ye (the GLU output is
// rounded to op too). Copies the offsets to the host (a stream sync).
void experts_gemm(const void* zg, DType op, int64_t dl, std::span<const MlpWeights> experts, const ExpertRows& rows,
                  const GluParams& act, float* ye, const Context& ctx);

}  // namespace kimi::cuda
