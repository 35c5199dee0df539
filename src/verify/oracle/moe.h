// src/verify/oracle/moe.h: fp64 oracles of SPEC 7 (router, Quantile Balancing, GLU, MLP, latent MoE) and an
// independent fp64 MXFP4 decoder (SPEC 10). Plain loops; row-major vectors; weights [out, in].
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace kimi::oracle {

using Vec = std::vector<double>;

struct Routing {
  std::vector<int64_t> ids;  // [T, K], descending biased score, ties to the lower expert index
  Vec weights;               // [T, K]
  Vec biased;                // [T, E] s + bias (for near-tie checks)
};
// bias: empty or [E].
Routing moe_router(const Vec& logits, const Vec& bias, int64_t t, int64_t e, int64_t k, bool renormalize,
                   double scaling);

// Quantile Balancing: returns the new bias [E] (see docs/ops/moe.md for the quantile definition).
Vec moe_quantile_balance(const Vec& scores, const Vec& bias, int64_t t, int64_t e, int64_t k);

struct Act {
  bool situ = false;
  double beta = 4, lbeta = 25;
};
double glu(double gate, double up, const Act& a);

// y[m, out] = x[m, in] W[out, in]^T
Vec matmul(const Vec& x, const Vec& w, int64_t m, int64_t in, int64_t out);

struct Mlp {
  Vec gate, up, down;  // [I, d], [I, d], [d, I]
  int64_t inter = 0;
};
Vec mlp(const Vec& x, const Mlp& w, int64_t m, int64_t d, const Act& a);

struct MoeWeights {
  Vec router;               // [E, d]
  Vec router_bias;          // [E] or empty
  Vec latent_down;          // [Dl, d] or empty (no latent)
  Vec latent_norm;          // [Dl] or empty
  Vec latent_up;            // [d, Dl] or empty
  int64_t latent = 0;       // Dl (0: no latent)
  int64_t num_experts = 0;
  std::function<Mlp(int64_t)> expert;  // expert e's fp64 weights on the latent width (fetched once each)
  const Mlp* shared = nullptr;
};
struct MoeOut {
  Vec out;  // [T, d]
  Routing routing;
};
MoeOut latent_moe(const Vec& x, const MoeWeights& w, int64_t t, int64_t d, int64_t k, bool renormalize,
                  double scaling, const Act& a, double norm_eps);

// SPEC 10 decoder: packed [out, in/2] (low nibble = even column), scale [out, in/32] E8M0.
Vec mxfp4_decode(const std::vector<uint8_t>& packed, const std::vector<uint8_t>& scale, int64_t out, int64_t in);

}  // namespace kimi::oracle
