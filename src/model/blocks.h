// src/model/blocks.h: the decoder's building blocks on a packed batch (used by forward.cpp).
//
// Every block reads a normalized input x [T, d] f32 and writes (beta = 0) or adds (beta = 1) its output
// into out [T, d] f32; mixers also advance their layer's cache rows of the batch's slots. A block runs on
// the device of x and out: its weights and cache pools are there (forward's placement), its temporaries
// are allocated there, and its index tensors (Step's offsets and slots) stay on the host.
#pragma once

#include <cstdint>
#include <vector>

#include "kimi/context.h"
#include "kimi/model/cache.h"
#include "kimi/model/config.h"
#include "kimi/tensor.h"
#include "model/weights.h"

namespace kimi::model {

// The batch as the blocks see it (validated by forward()).
struct Step {
  int64_t T = 0, N = 0;
  std::vector<int64_t> cu;     // [N+1] token offsets
  std::vector<int64_t> slot;   // [N] cache slot of sequence n
  std::vector<int64_t> start;  // [N] tokens slot n held before this step (its first new position)
  Tensor cu_t, slot_t;         // the same as i64 host tensors for the operators
  bool decode = false;         // every sequence advances by exactly one token
  int64_t len(int64_t n) const { return cu[size_t(n + 1)] - cu[size_t(n)]; }
};

// KDA (SPEC 5): projections, three short convs + SiLU (conv caches in the slots), fused gate, beta,
// L2 norm, chunkwise prefill or recurrent decode on the slot states, gated RMSNorm, output projection.
void kda_block(const Config& c, const KdaLayerWeights& w, Cache::Layer& cache, const Step& s, TensorView x,
               TensorView out, float beta, const Context& ctx);

// Gated MLA (SPEC 6): q (optionally low-rank), latent + k_pe written into the slots' latent cache; fresh
// sequences attend with the explicit prefill form, continuing ones with the absorbed form over the cache.
void mla_block(const Config& c, const MlaLayerWeights& w, Cache::Layer& cache, const Step& s, TensorView x,
               TensorView out, float beta, const Context& ctx);

// Dense GLU MLP or (latent) MoE (SPEC 7).
void ffn_block(const Config& c, const FfnWeights& w, TensorView x, TensorView out, float beta, const Context& ctx);

}  // namespace kimi::model
