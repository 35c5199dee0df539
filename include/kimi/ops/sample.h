// kimi/ops/sample.h: token sampling from rows of logits (greedy, temperature, top-k, top-p), with per-row
// parameters and a counter-based random draw, the same integers on every backend.
//
// Row n of logits, x[0, V) (f32, or bf16 read as f32), takes its parameters from row n of each tensor of
// SampleParams and picks tokens[n]:
//   1. x must hold no NaN and a finite maximum m = max_i x[i] (-inf masks a token; +inf is refused).
//   2. temperature T == 0: greedy, tokens[n] = the lowest i with x[i] == m (top_k, top_p and the draw unused).
//   3. Order: token i precedes token j when x[i] > x[j], or x[i] == x[j] and i < j (-0 == +0).
//      Candidates C: the first K tokens of that order, K = top_k if 0 < top_k < V, else V.
//   4. Weights, integers: d_i = (double(x[i]) - double(m)) / double(T) (IEEE fp64, round to nearest), and
//      w_i = floor(exp(d_i) * 2^40) with exp the fixed fp64 routine of src/core/sample_math.h (Cody-Waite
//      reduction and a degree-12 polynomial, every operation an IEEE fp64 add / multiply / divide, no fused
//      operation; w_i = 0 for d_i < -32). The top token has w = 2^40; a token less likely than ~2^-40 times the
//      top one gets w = 0 and is never drawn (at most V * 2^-40 of the mass, 1.5e-7 at V = 163840).
//   5. Nucleus (top_p < 1): Z = sum of w over C; need = min(Z, ceil(double(top_p) * double(Z))) (fp64); the
//      kept set is the shortest prefix of C in the order whose weight sum reaches need (the top-p nucleus of
//      sample_token before this operator: the shortest prefix by descending probability whose mass reaches
//      top_p, ties by lower id). top_p == 1 keeps C.
//   6. Draw: h = g(g(mix64(seed), sequence), step) with SplitMix64's g(s, i) = mix64(s + (i + 1) * 0x9E3779B97F4A7C15)
//      (kimi/ops/random.h's generator; seed, sequence and step as u64), W = sum of w over the kept set,
//      t = floor(h * W / 2^64) in [0, W) (uniform), and tokens[n] = the first kept token in ASCENDING ID order
//      whose running weight sum exceeds t (inverse CDF; the id order lets a GPU walk the row without sorting it).
// Every step is integer arithmetic or a fixed sequence of IEEE fp64 operations, so the CPU and CUDA backends
// return the same token for the same logits and parameters (the agreement test: tests/test_sample.cpp); the
// probability of token i is w_i / W, i.e. softmax(x / T) restricted to the kept set up to the 2^-40 rounding
// of the weights (docs/ops/sample.md). A row's draw depends only on (seed, sequence, step): any row can be
// sampled alone, in any batch, on any backend, and a graph-captured step replays with new values written into
// the same parameter tensors.
//
// logits: [N, V] f32/bf16, last dim stride 1, any row stride, 1 <= V < 2^24 (the weight sums fit 64 bits).
// params: each an [N] tensor (any stride) on logits' device:
//   temperature f32, finite >= 0 (0 = greedy);  top_k i32 >= 0 (0 = all);  top_p f32 in (0, 1];
//   seed, sequence, step i64 (their 64 bits as u64: any value).
// tokens: i32 [N] on logits' device, contiguous; sharing no memory with the inputs.
// Values: on the host the parameters and logits are read and checked before anything is written (a
// kimi::Error names the argument and the row: a bad parameter, a NaN in the row, a row without a finite
// maximum). On a CUDA device they are read only by the kernel (capturable in a CUDA graph): a row with a bad
// parameter, a NaN or no finite maximum gets the token -1, the caller's to check.
#pragma once

#include "kimi/context.h"
#include "kimi/tensor.h"

namespace kimi {

struct SampleParams {
  TensorView temperature, top_k, top_p;  // f32, i32, f32 [N]
  TensorView seed, sequence, step;       // i64 [N]: the draw's counter
};

void sample_tokens(TensorView logits, const SampleParams& params, TensorView tokens, const Context& ctx = {});

}  // namespace kimi
