// cpu::register_ops (src/core/registry.h): the CPU backend implements every operator; it is the reference the
// other backends are tested against. Where an operator's validated arguments are not yet the kernel's form (the
// short convs' sequence list, decode's [N, C] rows as [N, 1, C]) the adapter is here.
#include <vector>

#include "core/registry.h"
#include "cpu/add_into.h"
#include "cpu/attn_res.h"
#include "cpu/conv.h"
#include "cpu/gather.h"
#include "cpu/kda.h"
#include "cpu/linear.h"
#include "cpu/mla.h"
#include "cpu/moe.h"
#include "cpu/mxfp4.h"
#include "cpu/norm.h"
#include "cpu/random.h"
#include "cpu/sample.h"

namespace kimi::cpu {

namespace {

// Sequence n: batch row n (or row 0 with packed offsets), tokens from its offset, cache row rows[n].
void conv_fwd(TensorView x, TensorView w, TensorView cache_in, TensorView cache_out, const std::vector<int64_t>& offsets,
              bool packed, const std::vector<int64_t>& rows, ConvActivation act, TensorView y, const Context& ctx) {
  const size_t nseq = offsets.size() - 1;
  std::vector<ConvSeq> seqs(nseq);
  for (size_t n = 0; n < nseq; ++n) {
    const int64_t b = packed ? 0 : int64_t(n);
    const int64_t t0 = packed ? offsets[n] : 0;
    seqs[n] = {b, t0, offsets[n + 1] - offsets[n], rows[n]};
  }
  short_conv(x, w, cache_in, cache_out, seqs, act, y, ctx);
}

// One token per sequence: x [N, C] as [N, 1, C]; the cache is read and written in place.
void conv_update(TensorView x, TensorView w, TensorView cache, const std::vector<int64_t>& rows, ConvActivation act,
                 TensorView y, const Context& ctx) {
  const int64_t n = x.size(0), channels = x.size(1);
  const int64_t shape3[3] = {n, 1, channels};
  const int64_t xs[3] = {x.stride(0), channels, 1}, ys[3] = {y.stride(0), channels, 1};
  const TensorView x3(x.data, x.dtype, shape3, xs, x.device), y3(y.data, y.dtype, shape3, ys, y.device);
  std::vector<ConvSeq> seqs(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) seqs[size_t(i)] = {i, 0, 1, rows[size_t(i)]};
  short_conv(x3, w, cache, cache, seqs, act, y3, ctx);
}

}  // namespace

void register_ops(Registry& r) {
  constexpr Backend b = Backend::cpu;
  r.link(b);
  r.rms_norm.set(b, rms_norm);
  r.add_rms_norm.set(b, add_rms_norm);
  r.gated_rms_norm.set(b, gated_rms_norm);
  r.l2_norm.set(b, l2_norm);
  r.linear.set(b, linear);
  r.linear_many.set(b, linear_many);
  r.mxfp4_dequant.set(b, mxfp4_dequant);
  r.mxfp4_quant.set(b, mxfp4_quant);
  r.short_conv_fwd.set(b, conv_fwd);
  r.short_conv_update.set(b, conv_update);
  r.kda_gate.set(b, kda_gate);
  r.kda_beta.set(b, kda_beta);
  r.kda_recurrent_fwd.set(b, kda_recurrent_fwd);
  r.kda_chunk_fwd.set(b, kda_chunk_fwd);
  r.kda_decode_step.set(b, kda_decode_step);
  r.mla_prefill.set(b, mla_prefill);
  // index arguments: the CPU backend always gets host values (src/core/index.h)
  r.mla_cache_write.set(b, [](TensorView latent, TensorView k_pe, TensorView cache, const Index& start,
                              const Index& slots, const Context& ctx) {
    mla_cache_write(latent, k_pe, cache, start.host, slots.host, ctx);
  });
  r.mla_decode.set(b, [](TensorView q, TensorView cache, const Index& lens, const Index& slots, const Weight& w_kvb,
                         TensorView gate, const MlaDims& d, TensorView o, const Context& ctx) {
    mla_decode(q, cache, lens.host, slots.host, w_kvb, gate, d, o, ctx);
  });
  r.moe_router.set(b, moe_router);
  r.moe_quantile_balance.set(b, moe_quantile_balance);
  r.glu.set(b, glu);
  r.mlp.set(b, mlp);
  r.latent_moe.set(b, latent_moe);
  r.attn_res.set(b, attn_res);
  r.gather_rows.set(b, [](TensorView src, const Index& rows, TensorView out, const Context& ctx) {
    gather_rows(src, rows.host, out, ctx);
  });
  r.fill_random.set(b, fill_random);
  r.sample_tokens.set(b, sample_tokens);
  r.add_into.set(b, add_into);
}

}  // namespace kimi::cpu
