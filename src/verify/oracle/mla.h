// src/verify/oracle/mla.h: fp64 oracle of SPEC 6 (gated MLA, NoPE), explicit (non-absorbed) form,
// written plainly from the spec: k_h and v_h are materialized for every key token.
#pragma once

#include <cstdint>
#include <vector>

namespace kimi::oracle {

using Vec = std::vector<double>;

struct MlaSizes {
  int64_t heads, kv_lora, qk_nope, qk_rope, v_dim;  // H, R, Dn, P, Dv
};

// One sequence. Key tokens j = 0..Tk-1: latent [Tk, R], k_pe [Tk, P]. Queries i = 0..Tq-1:
// q [Tq, H, Dn+P] at positions pos[i] (query i attends to keys j <= pos[i]). w_kvb [H*(Dn+Dv), R].
// gate: null or [Tq, H*Dv] raw (sigmoid applied). Returns o [Tq, H, Dv].
Vec mla_attention(const Vec& q, const std::vector<int64_t>& pos, const Vec& latent, const Vec& k_pe, int64_t tk,
                  const Vec& w_kvb, const Vec* gate, const MlaSizes& s, double scale);

}  // namespace kimi::oracle
