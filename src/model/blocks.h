// src/model/blocks.h: the decoder's building blocks on a packed batch (used by forward.cpp).
//
// Every block reads a normalized input x [T, d] in the activation dtype (f32 or bf16: docs/model/runtime.md) and
// writes (beta = 0) or adds (beta = 1) its output into out [T, d] f32, the residual stream; mixers also advance
// their layer's cache rows of the batch's slots. A block runs on the device of x and out: its weights and cache
// pools are there (forward's placement), its temporaries come from that device's Workspace (in x's dtype), and
// its index tensors (the Step's tables) stay on the host.
//
// Each block's temporaries are declared by one function (kda_temps, mla_temps, ffn_temps): the block calls it on
// the step's real workspace, and the plan (step_plan.h) calls it on a measuring one for the largest batch, so the
// arena is sized by the same code that uses it.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kimi/context.h"
#include "kimi/model/cache.h"
#include "kimi/model/config.h"
#include "kimi/ops/moe.h"
#include "kimi/tensor.h"
#include "model/weights.h"
#include "model/workspace.h"

namespace kimi::model {

// The batch as the blocks see it: validated and resolved by forward() once per step. The index tensors are i64
// host views into the step's host workspace, built once per step (not per layer).
struct Step {
  int64_t T = 0, N = 0;
  std::vector<int64_t> cu;     // [N+1] token offsets
  std::vector<int64_t> slot;   // [N] cache slot of sequence n
  std::vector<int64_t> start;  // [N] tokens slot n held before this step (its first new position)
  TensorView cu_t, slot_t;     // the same as i64 [N+1], [N]
  bool decode = false;         // every sequence advances by exactly one token

  // MLA: token t of sequence n sits at position pos[t] = start[n] + (t - cu[n]) of its slot.
  TensorView pos_t, tok_slot_t;  // i64 [T]: every token's cache position and slot (mla_cache_write)
  // The attention splits the tokens into those of fresh sequences (start 0: explicit prefill over their own
  // tokens) and continuing ones (absorbed decode over the cache). In "MLA order" the fresh tokens come first
  // (rows [0, mla_fresh)), then the continuing ones, each group in batch order. When the batch is already in
  // that order (all fresh, all continuing, or fresh sequences first) mla_reorder is false and the rows are
  // used in place; otherwise mla_perm[i] is the batch row of MLA row i and mla_inv its inverse.
  int64_t mla_fresh = 0;
  bool mla_reorder = false;
  TensorView mla_perm, mla_inv;         // i64 [T]
  TensorView fresh_cu_t;                // i64 [Nf+1]: offsets of the fresh sequences in MLA order
  TensorView cont_lens_t, cont_slot_t;  // i64 [T - mla_fresh]: pos + 1 and slot of each continuing token

  int64_t len(int64_t n) const { return cu[size_t(n + 1)] - cu[size_t(n)]; }
};

// KDA (SPEC 5): projections, three short convs + SiLU (conv caches in the slots), fused gate, beta,
// L2 norm, chunkwise prefill or recurrent decode on the slot states, gated RMSNorm, output projection.
struct KdaTemps {
  TensorView xq, xk, xv;  // [T, P] projections before the convs
  TensorView fa, f, b, z;  // [T, K] low-rank gate input, [T, P] raw gate, [T, H] raw beta, [T, P] output gate
  TensorView ga;           // [T, K] low-rank output-gate input (absent with a full-rank W_g)
  TensorView y;            // [T, P] the gated, normed output
  TensorView q, k, v, o;   // [T, P] after the convs and the attention (prefill only; absent in decode)
};
KdaTemps kda_temps(Workspace& ws, const Config& c, int64_t T, DType dt, bool decode);
void kda_block(const Config& c, const KdaLayerWeights& w, Cache::Layer& cache, const Step& s, TensorView x,
               TensorView out, float beta, Workspace& ws, const Context& ctx);

// Gated MLA (SPEC 6): q (optionally low-rank), latent + k_pe written into the slots' latent cache; fresh
// sequences attend with the explicit prefill form, continuing ones with the absorbed form over the cache.
struct MlaTemps {
  TensorView q, qa, kva, latent, gate, o;  // batch order; qa only with q_lora_rank, gate only with the output gate
  // MLA order (Step::mla_reorder only): the attention's inputs and output gathered into fresh-first rows
  TensorView q_r, latent_r, pe_r, gate_r, o_r;
};
MlaTemps mla_temps(Workspace& ws, const Config& c, int64_t T, DType dt, bool reorder);
void mla_block(const Config& c, const MlaLayerWeights& w, Cache::Layer& cache, const Step& s, TensorView x,
               TensorView out, float beta, Workspace& ws, const Context& ctx);

// Dense GLU MLP or (latent) MoE (SPEC 7).
struct FfnTemps {
  TensorView y;  // f32 [T, d]: the MoE output before it is added into out (latent_moe has no accumulate form)
};
FfnTemps ffn_temps(Workspace& ws, const Config& c, bool moe, int64_t T, float beta);
// An MoE block run elsewhere (ForwardOptions::moe): x [T, d] -> y f32 [T, d], latent_moe's contract.
using MoeHook = std::function<void(TensorView x, TensorView y)>;
// With a hook, an MoE layer (beta 1 only) calls it instead of latent_moe.
void ffn_block(const Config& c, const FfnWeights& w, TensorView x, TensorView out, float beta, Workspace& ws,
               const Context& ctx, const MoeHook& hook = {});
// The latent_moe weights of an MoE layer (views into w).
LatentMoeWeights latent_moe_weights(const FfnWeights& w);
// The MoE parameters of a config: the router's and the GLU activation's.
RouterParams moe_router_params(const Config& c);
GluParams glu_params(const Config& c);

}  // namespace kimi::model
