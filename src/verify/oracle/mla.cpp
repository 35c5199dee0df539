#include "verify/oracle/mla.h"

#include <cmath>

namespace kimi::oracle {

Vec mla_attention(const Vec& q, const std::vector<int64_t>& pos, const Vec& latent, const Vec& k_pe, int64_t tk,
                  const Vec& w_kvb, const Vec* gate, const MlaSizes& s, double scale) {
  const int64_t H = s.heads, R = s.kv_lora, Dn = s.qk_nope, P = s.qk_rope, Dv = s.v_dim;
  const int64_t tq = int64_t(pos.size());
  Vec o(size_t(tq * H * Dv), 0.0);
  for (int64_t h = 0; h < H; ++h) {
    // k_h [tk, Dn+P] = [W_kvb[h, :Dn] c_j | k_pe_j];  v_h [tk, Dv] = W_kvb[h, Dn:] c_j
    Vec k(size_t(tk * (Dn + P))), v(size_t(tk * Dv));
    for (int64_t j = 0; j < tk; ++j) {
      for (int64_t e = 0; e < Dn + Dv; ++e) {
        double acc = 0;
        const int64_t row = h * (Dn + Dv) + e;
        for (int64_t r = 0; r < R; ++r) acc += w_kvb[size_t(row * R + r)] * latent[size_t(j * R + r)];
        if (e < Dn)
          k[size_t(j * (Dn + P) + e)] = acc;
        else
          v[size_t(j * Dv + e - Dn)] = acc;
      }
      for (int64_t e = 0; e < P; ++e) k[size_t(j * (Dn + P) + Dn + e)] = k_pe[size_t(j * P + e)];
    }
    for (int64_t i = 0; i < tq; ++i) {
      const int64_t nk = pos[size_t(i)] + 1;  // causal: keys 0..pos[i]
      Vec sc(static_cast<size_t>(nk));
      double mx = -INFINITY;
      for (int64_t j = 0; j < nk; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < Dn + P; ++e)
          dot += q[size_t((i * H + h) * (Dn + P) + e)] * k[size_t(j * (Dn + P) + e)];
        sc[size_t(j)] = dot * scale;
        mx = std::fmax(mx, sc[size_t(j)]);
      }
      double sum = 0;
      for (int64_t j = 0; j < nk; ++j) {
        sc[size_t(j)] = std::exp(sc[size_t(j)] - mx);
        sum += sc[size_t(j)];
      }
      for (int64_t e = 0; e < Dv; ++e) {
        double acc = 0;
        for (int64_t j = 0; j < nk; ++j) acc += sc[size_t(j)] / sum * v[size_t(j * Dv + e)];
        if (gate) acc *= 1.0 / (1.0 + std::exp(-(*gate)[size_t(i * H * Dv + h * Dv + e)]));
        o[size_t((i * H + h) * Dv + e)] = acc;
      }
    }
  }
  return o;
}

}  // namespace kimi::oracle
