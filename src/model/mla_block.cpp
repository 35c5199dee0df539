// src/model/mla_block.cpp: one gated MLA mixer on a packed batch (SPEC 6).
//
//   q = W_qb RMSNorm_qa(W_qa x)  (or W_q x)             [T, H, Dn+Pr]
//   [c | k_pe] = W_kva x;  latent = RMSNorm_kva(c)       [T, R], [T, Pr]   (eps mla_norm_eps, 1e-6)
//   cache[slot, start + t] = [latent_t | k_pe_t]         every new token of every sequence
//   o = causal attention over the sequence's tokens      [T, H, Dv]
//       fresh sequence (start 0): explicit prefill form over its new tokens (mla_prefill)
//       continuing sequence:      absorbed form, token t attends to cache rows [0, start + t] (mla_decode)
//   o *= sigmoid(W_g x) (K3 output gate, inside the attention ops);  out (+)= W_o o
#include <optional>

#include "kimi/ops/linear.h"
#include "kimi/ops/mla.h"
#include "kimi/ops/norm.h"
#include "core/views.h"
#include "model/blocks.h"

namespace kimi::model {

void mla_block(const Config& c, const MlaLayerWeights& w, Cache::Layer& cache, const Step& s, TensorView x,
               TensorView out, float beta, const Context& ctx) {
  const int64_t T = s.T, H = c.num_attention_heads, Dq = c.qk_nope_head_dim + c.qk_rope_head_dim,
                Dv = c.v_head_dim, R = c.kv_lora_rank, Pr = c.qk_rope_head_dim;
  const Device dev = x.device;  // the block's device (weights, latent pool, temporaries); index tensors: host
  Tensor q(DType::f32, {T, H * Dq}, dev);
  if (w.q.w.present()) {
    linear(x, w.q, q, 0.f, ctx);
  } else {
    Tensor qa(DType::f32, {T, w.q_a.out_features()}, dev);
    linear(x, w.q_a, qa, 0.f, ctx);
    rms_norm(qa, w.q_a_norm, c.mla_norm_eps, qa, ctx);
    linear(qa, w.q_b, q, 0.f, ctx);
  }
  Tensor kva(DType::f32, {T, R + Pr}, dev), latent(DType::f32, {T, R}, dev);
  linear(x, w.kv_a, kva, 0.f, ctx);
  rms_norm(kva.view().slice(1, 0, R), w.kv_a_norm, c.mla_norm_eps, latent, ctx);
  const TensorView k_pe = kva.view().slice(1, R, R + Pr);  // [T, Pr], row stride R + Pr
  Tensor gate;
  if (w.g.w.present()) {
    gate = Tensor(DType::f32, {T, H * Dv}, dev);
    linear(x, w.g, gate, 0.f, ctx);
  }

  Tensor o(DType::f32, {T, H * Dv}, dev);
  for (int64_t n = 0; n < s.N; ++n) {
    const int64_t r0 = s.cu[size_t(n)], r1 = s.cu[size_t(n + 1)], len = r1 - r0, start = s.start[size_t(n)];
    // sequence n's rows: q [len, H, Dq], latent [len, R], k_pe [len, Pr], gate [len, H*Dv], o [len, H, Dv]
    const TensorView qn = view::split_last(q.view().slice(0, r0, r1), H), cn = latent.view().slice(0, r0, r1),
                     pn = k_pe.slice(0, r0, r1), on = view::split_last(o.view().slice(0, r0, r1), H),
                     gn = gate.data() ? gate.view().slice(0, r0, r1) : TensorView{};
    Tensor st(DType::i64, {1}), sl(DType::i64, {1});
    st.data_as<int64_t>()[0] = start, sl.data_as<int64_t>()[0] = s.slot[size_t(n)];
    mla_cache_write(view::insert_dim0(cn), view::insert_dim0(pn), cache.latent, st, sl, ctx);
    if (start == 0) {
      mla_prefill(view::insert_dim0(qn), view::insert_dim0(cn), view::insert_dim0(pn), w.kv_b,
                  gn.present() ? view::insert_dim0(gn) : gn, {}, std::nullopt, view::insert_dim0(on), ctx);
    } else {
      Tensor lens(DType::i64, {len}), slots(DType::i64, {len});
      for (int64_t t = 0; t < len; ++t)
        lens.data_as<int64_t>()[t] = start + t + 1, slots.data_as<int64_t>()[t] = s.slot[size_t(n)];
      mla_decode(qn, cache.latent, lens, slots, w.kv_b, gn, std::nullopt, on, ctx);
    }
  }
  linear(o, w.o, out, beta, ctx);
}

}  // namespace kimi::model
