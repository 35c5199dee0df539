// src/cuda/mla/mla.h: CUDA launchers of kimi/ops/mla.h (arguments validated and index tensors read on the host
// by src/ops/mla.cpp, exactly as for the CPU backend; float tensors on one CUDA device).
//   mla_prefill: bf16 q, latent, k_pe and W_kvb (o bf16 or f32): kv = latent W_kvb^T by cuBLAS, then the fused
//     tensor-core flash attention (flash.cuh, prefill_flash.cu) where its layout conditions hold (mla_flash_supported),
//     else cuBLAS score blocks and a causal softmax (prefill_gemm.cu); otherwise fp32 GEMM kv = latent W_kvb^T
//     (gemm.cuh), then causal FFMA flash attention (prefill.cuh), Dn + P <= 256, Dv <= 128. Tests and benchmarks pick
//     the bf16 attention through options.h.
//   mla_cache_write: one CTA per written row (cache_write.cuh).
//   mla_decode: absorb, split-sequence attention over all heads of a head group (decode.cuh), merge of the splits and
//     W_kvb_v projection (decode_proj.cuh);
//     the attention on bf16 tensor cores for bf16 queries (decode_tc.cuh, decode_options.h). R <= 512.
// With host index values each launcher uploads a small table (tiles / lens / slots / destinations) and refuses CUDA
// graph capture (cuda/scratch.cuh); mla_cache_write and mla_decode also take the device form of their index
// arguments (src/core/index.h), read on the device: those calls capture.
#pragma once

#include <vector>

#include "core/dims.h"
#include "core/index.h"  // MlaDims: the sizes src/ops/mla.cpp derived and cross-checked
#include "kimi/context.h"
#include "kimi/ops/linear.h"
#include "kimi/tensor.h"

namespace kimi::cuda {

void mla_prefill(TensorView q, TensorView latent, TensorView k_pe, const Weight& w_kvb, TensorView gate,
                 const std::vector<int64_t>& cu, const MlaDims& d, TensorView o, const Context& ctx);
// The bf16 tensor-core form of mla_prefill (prefill_gemm.cu): false (nothing done) where its operands are not bf16
// with contiguous last dimensions and evenly strided tokens.
bool mla_prefill_gemm(TensorView q, TensorView latent, TensorView k_pe, const Weight& w_kvb, TensorView gate,
                      const std::vector<int64_t>& cu, const MlaDims& d, TensorView o, const Context& ctx);
// The fused kernel's conditions (prefill_flash.cu): Dn, P, Dv multiples of 8, Dn + P <= 256, Dv <= 128, H <= 65535,
// q and k_pe token / head strides multiples of 8 elements, their data 16-byte aligned (the bf16 checks of
// mla_prefill_gemm come first).
bool mla_flash_supported(TensorView q, TensorView k_pe, const MlaDims& d);
// The fused causal attention over kv = latent W_kvb^T (bf16 [B*T, H*(Dn+Dv)], made by mla_prefill_gemm) into o:
// flash_fa3.cuh (wgmma, TMA; Dn, P, Dv multiples of 64 filling an instance: mla_flash_fa3_supported) or flash.cuh
// (mma.sync; any head sizes mla_flash_supported takes), as `kernel` says. A kernel that cannot take the shapes is an
// Error, not a fallback.
enum class MlaFlashKernel { mma_sync, fa3 };
bool mla_flash_fa3_supported(const MlaDims& d, int64_t tokens);
void mla_prefill_flash(TensorView q, const void* kv, TensorView k_pe, TensorView gate,
                       const std::vector<int64_t>& cu, const MlaDims& d, TensorView o, MlaFlashKernel kernel,
                       const Context& ctx);
void mla_cache_write(TensorView latent, TensorView k_pe, TensorView cache, const Index& start, const Index& slots,
                     const Context& ctx);
void mla_decode(TensorView q, TensorView cache, const Index& lens, const Index& slots, const Weight& w_kvb,
                TensorView gate, const MlaDims& d, TensorView o, const Context& ctx);

}  // namespace kimi::cuda
