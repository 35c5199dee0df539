// src/verify/oracle/kda.h: fp64 oracle of SPEC 5 (KDA), written plainly from the spec: the gate forms, beta
// sigmoid, q/k L2 norm, scale, initial state, packed variable-length batches, token by token.
#pragma once

#include <cstdint>
#include <vector>

namespace kimi::oracle {

using Vec = std::vector<double>;

struct KdaProblem {
  int64_t B = 1, T = 0, H = 1, K = 1, V = 1;
  Vec q, k, v;  // row-major [B, T, H, K] / [B, T, H, V]
  Vec g;        // [B, T, H, K]: log decay, or the raw gate input f when use_gate
  Vec beta;     // [B, T, H]: beta, or its logit when beta_sigmoid
  bool use_gate = false;
  bool bounded = false;  // gate form: bounded (K3) or softplus (Kimi-Linear)
  Vec A_log;             // [H]
  Vec dt_bias;           // [H * K]
  double lower_bound = -5.0;
  bool beta_sigmoid = false;
  bool l2norm = false;
  double scale = 0;         // 0: K^-0.5
  Vec h0;                   // [N, H, K, V] or empty (zeros)
  std::vector<int64_t> cu;  // N + 1 offsets, or empty (N = B)
};

struct KdaResult {
  Vec o;   // [B, T, H, V]
  Vec ht;  // [N, H, K, V]
};

KdaResult kda(const KdaProblem& p);

// SPEC 5 gate on raw f [rows, H, K] (row-major): log decay g of the same shape.
Vec kda_gate(const Vec& f, int64_t H, int64_t K, bool bounded, const Vec& A_log, const Vec& dt_bias,
             double lower_bound);

}  // namespace kimi::oracle
