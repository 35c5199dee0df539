// kimi/model/cost.h: one cost model of the forward, from the Config alone: the bytes every op of a prefill or a
// decode step moves and the FLOPs it does, and what that predicts on a chip (roofline). `kimi plan` prints it;
// `kimi bench` prints measured beside it.
//
// A step runs M = batch * new_tokens_per_seq tokens (T = new_tokens_per_seq per sequence, N = batch sequences),
// each sequence holding `context` tokens before the step. Sizes: d hidden, a / c bytes per activation / cache
// element (Workload::activations), w bytes per dense weight (WeightFormat::dense), e bytes per routed-expert weight
// (w, or 4.25 / 8 for MXFP4: packed E2M1 nibbles + one E8M0 scale byte per 32 weights, SPEC 10). fp32 parameters
// (A_log, dt_bias, conv weights, o_norm, router bias) are 4 bytes whatever w is.
//
// Per op (OpCost): weight bytes read (each weight read once per step), activation bytes read + written, cache
// bytes read + written, FLOPs. Families:
//   GEMM [rows, in] x W[out, in]^T:   weights out*in*w   activations rows*(in + out)*a   FLOPs 2*rows*out*in
//   RMSNorm over `width`:             weights width*w    activations 2*rows*width*a       FLOPs 4*rows*width
//   residual add of [M, d]:           activations 3*M*d*a                                 FLOPs M*d
//   elementwise (GLU, gates):         inputs + outputs;  FLOPs a few per element (the formula's mul/add; exp,
//                                     sigmoid, tanh count 1 each). They are never the bound; they are listed so
//                                     that prefill activation traffic is counted.
// Embedding: the M rows gathered (min(M, vocab) * d * w), not the table. Head: the final norm and lm_head on one row
// per sequence (its last token, as generate() asks for), lm_head's whole [vocab, d] read.
// KDA layer (H heads, K = V = head_dim, P = H*K, conv kernel W): q/k/v/f_a/f_b/b/g/o GEMMs; short_conv weights 3*P*W*4,
//   cache 3*P*(W-1)*c per sequence written (and read when context > 0), FLOPs 3*M*P*2W; gate g (f32 out); the core:
//   state [H, K, V] f32 per sequence: written, and read when context > 0 (a new sequence starts from zero);
//   activations q, k, v, o (a), g (f32), beta (f32);
//   FLOPs per token and head: decode (T = 1, recurrent, SPEC 5): 7*K*V (decay, S^T k, rank-1 update, S^T q);
//   prefill (chunk form, SPEC 5.1, C = min(64, T)): per chunk A_kk, A_qk, W = T Diag(beta) K e^G (2C^2K each),
//   T Diag(beta) V and A_qk U (2C^2V each), (I + A_kk)^-1 (C^3/3), W S, (Q e^G) S, (K e^(G_C-G))^T U (2CKV each),
//   the decay of S (KV): per token 6CK + 4CV + C^2/3 + 6KV + KV/C (K = V = 128, C = 64: 1.8e5).
// MLA layer (Hm heads, nope + rope = qk, v, r = kv_lora): q (or q_a, q_a_norm, q_b), kv_a, kv_a_norm GEMMs/norms;
//   the latent row [r | rope] of each new token written to the cache (c bytes each); the context's rows read:
//   N * context * (r + rope) * c per layer.
//   prefill (T > 1): kv_b expands the latents of all context + T tokens (GEMM over N*(context + T) rows), then
//   causal attention over pairs = N*(T*context + T(T+1)/2) per head: FLOPs 2*pairs*Hm*(qk + v) + 5*pairs*Hm (softmax);
//   decode (T = 1, absorbed, SPEC 6): q_absorb (q_nope through kv_b's key part: 2*M*Hm*nope*r), scores over the
//   576-wide latent and the weighted latent sum for context + 1 positions (2*M*Hm*(context+1)*(2r + rope)),
//   v_absorb (kv_b's value part: 2*M*Hm*v*r); kv_b's weights are read once either way.
// FFN: dense GLU (gate, up, GLU, down); MoE: router GEMM [E, d], latent down/norm/up (K3), routed experts on
//   S = M*k token-slots: FLOPs 2*S*3*I*latent; weights read: the DISTINCT experts the step touches. Under uniform
//   routing a token picks k of E experts, so an expert escapes one token with probability 1 - k/E and all M tokens
//   with (1 - k/E)^M: expected distinct experts U = E * (1 - (1 - k/E)^M) (M = 1: k; Kimi-Linear M = 32: 163 of
//   256). Real routers are skewed, which touches fewer: U is the uniform (upper) estimate. Shared experts: always.
// AttnRes (K3): each attn_res reads its n + 1 candidates [M, d] and writes [M, d], FLOPs 7*(n+1)*M*d; n = blocks
//   sealed so far (SPEC 8; K3: 9 candidates at the output).
//
// Not counted: kernel launches, routing's permutation bookkeeping, sampling, host work. The prediction is a floor.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kimi/dtype.h"
#include "kimi/model/config.h"

namespace kimi::model {

struct Workload {
  int64_t batch = 1;                // N sequences in the step
  int64_t new_tokens_per_seq = 1;   // T: 1 = a decode step, > 1 = a prefill (or a prefill chunk)
  int64_t context = 0;              // tokens already in each sequence's cache before the step
  DType activations = DType::bf16;  // between ops, and the MLA latent and conv caches (KDA state is always f32)
};

struct WeightFormat {
  DType dense = DType::bf16;   // every weight but the fp32 parameters and MXFP4 experts
  bool mxfp4_experts = false;  // routed experts in MXFP4 (4.25 bits per weight)
};
// How a config's checkpoints store weights: bf16, with MXFP4 routed experts in K3's layout (as random-model's auto).
WeightFormat default_weight_format(const Config& c);
// Bytes per routed-expert weight: dtype_size(dense), or 4.25 / 8 = 0.53125 for MXFP4.
double expert_weight_bytes(const WeightFormat& f);

struct OpCost {
  std::string layer_kind;  // kda | mla | dense_ffn | moe | embed | head | attn_res
  std::string op;          // e.g. q_proj, kda_chunk, experts_gate_up, lm_head
  int64_t layer = -1;      // 0-based decoder layer; -1 for embed, head and the output attn_res
  double bytes_weights = 0, bytes_activations = 0, bytes_cache = 0, flops = 0;
  double bytes() const { return bytes_weights + bytes_activations + bytes_cache; }
};

struct ForwardCost {
  Workload workload;
  WeightFormat weights;
  std::vector<OpCost> ops;  // in forward order: embed, layers 0..L-1 (mixer then FFN), head
  double bytes_weights = 0, bytes_activations = 0, bytes_cache = 0, flops = 0;  // sums over ops
  double touched_experts = 0;          // expected distinct routed experts per MoE layer (0 without MoE)
  double touched_expert_fraction = 0;  // touched_experts / num_experts
  double weights_resident = 0;         // bytes of every weight a checkpoint stores: all experts, the whole embedding
                                       // table, and the few tensors never read (layer 0's first AttnRes, A_log's tail)
  double cache_per_seq = 0;            // cache bytes one sequence holds after the step (state, conv, latent rows)
  int64_t tokens() const { return workload.batch * workload.new_tokens_per_seq; }
  double bytes() const { return bytes_weights + bytes_activations + bytes_cache; }
};

// Expected distinct experts that `tokens` tokens touch, each picking top_k of num_experts uniformly:
// E * (1 - (1 - k/E)^tokens). Throws kimi::Error on E < 1, k outside [1, E] or tokens < 0.
double expected_distinct_experts(int64_t num_experts, int64_t top_k, int64_t tokens);

// The cost of one forward step. Throws kimi::Error naming the field (batch, new_tokens_per_seq >= 1, context >= 0,
// float activations, MXFP4 expert widths divisible by 32).
ForwardCost forward_cost(const Config& c, const Workload& w, const WeightFormat& f);
inline ForwardCost forward_cost(const Config& c, const Workload& w) { return forward_cost(c, w, default_weight_format(c)); }

// A chip for the roofline. Peaks, not achieved rates, unless `source` says measured.
struct Chip {
  std::string name;
  double hbm_bytes_per_s = 0;   // HBM bandwidth
  double bf16_flops_per_s = 0;  // dense bf16 tensor-core peak (every FLOP of the model is charged at this rate)
  double memory_bytes = 0;      // HBM capacity (0: unknown)
  std::string source;
};
// h200 (measured here: BENCH.md), h100 (H100 SXM datasheet), b200 (DGX B200 datasheet, per GPU).
std::span<const Chip> named_chips();
// The named chip; kimi::Error listing the names otherwise.
const Chip& named_chip(std::string_view name);

struct OpTime {
  double seconds = 0;          // max(bytes / bandwidth, flops / peak)
  bool compute_bound = false;  // flops / peak > bytes / bandwidth
};
struct Prediction {
  Chip chip;
  std::vector<OpTime> ops;      // one per ForwardCost::ops
  double seconds = 0;           // the step: sum over ops
  double memory_seconds = 0;    // sum of bytes / bandwidth (the step if nothing were compute bound)
  double compute_seconds = 0;   // sum of flops / peak
  double tokens_per_s = 0;      // tokens of the step / seconds (all sequences)
  double steps_per_s = 0;       // 1 / seconds (a decode step: each sequence's tokens/s)
};
// The roofline time of each op on `chip`, and of the step. kimi::Error when a rate is not > 0.
Prediction predict(const ForwardCost& cost, const Chip& chip);
// HBM bandwidth (bytes/s) for `steps_per_s` of this step: bytes per step * steps/s, compute ignored (a decode step
// is bandwidth bound wherever the compute it needs, flops * steps/s, is below the chip's peak: check that too).
double bandwidth_for(const ForwardCost& cost, double steps_per_s);

}  // namespace kimi::model
