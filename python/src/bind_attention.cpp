// python/src/bind_attention.cpp: gated MLA (NoPE) prefill / cache write / decode and Block Attention
// Residuals (include/kimi/ops/mla.h, attn_res.h).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/vector.h>

#include <vector>

#include "kimi/ops/attn_res.h"
#include "kimi/ops/mla.h"
#include "view.h"

namespace kimi::py {

void bind_attention(nb::module_& m) {
  m.def(
      "mla_prefill",
      [](const Array& q, const Array& latent, const Array& k_pe, const Array& w_kvb, const OptArray& gate,
         const OptArray& cu_seqlens, std::optional<float> softmax_scale, const Array& o, uintptr_t stream) {
        const char* op = "mla_prefill";
        const TensorView qv = view(op, "q", q), lv = view(op, "latent", latent), pv = view(op, "k_pe", k_pe),
                         gv = view(op, "gate", gate), cv = view(op, "cu_seqlens", cu_seqlens), ov = view(op, "o", o);
        const Weight w = weight(op, "w_kvb", w_kvb, std::nullopt);
        const Context ctx = context(stream);
        run([&] { kimi::mla_prefill(qv, lv, pv, w, gv, cv, softmax_scale, ov, ctx); });
      },
      nb::arg("q"), nb::arg("latent"), nb::arg("k_pe"), nb::arg("w_kvb"), nb::arg("gate").none(),
      nb::arg("cu_seqlens").none(), nb::arg("softmax_scale").none(), nb::arg("o"), nb::arg("stream") = 0);

  m.def(
      "mla_cache_write",
      [](const Array& latent, const Array& k_pe, const Array& cache, const Array& start, const OptArray& slots,
         uintptr_t stream) {
        const char* op = "mla_cache_write";
        const TensorView lv = view(op, "latent", latent), pv = view(op, "k_pe", k_pe), cv = view(op, "cache", cache),
                         st = view(op, "start", start), sl = view(op, "slots", slots);
        const Context ctx = context(stream);
        run([&] { kimi::mla_cache_write(lv, pv, cv, st, sl, ctx); });
      },
      nb::arg("latent"), nb::arg("k_pe"), nb::arg("cache"), nb::arg("start"), nb::arg("slots").none(),
      nb::arg("stream") = 0);

  m.def(
      "mla_decode",
      [](const Array& q, const Array& cache, const Array& lens, const OptArray& slots, const Array& w_kvb,
         const OptArray& gate, std::optional<float> softmax_scale, const Array& o, uintptr_t stream) {
        const char* op = "mla_decode";
        const TensorView qv = view(op, "q", q), cv = view(op, "cache", cache), lv = view(op, "lens", lens),
                         sv = view(op, "slots", slots), gv = view(op, "gate", gate), ov = view(op, "o", o);
        const Weight w = weight(op, "w_kvb", w_kvb, std::nullopt);
        const Context ctx = context(stream);
        run([&] { kimi::mla_decode(qv, cv, lv, sv, w, gv, softmax_scale, ov, ctx); });
      },
      nb::arg("q"), nb::arg("cache"), nb::arg("lens"), nb::arg("slots").none(), nb::arg("w_kvb"),
      nb::arg("gate").none(), nb::arg("softmax_scale").none(), nb::arg("o"), nb::arg("stream") = 0);

  m.def(
      "attn_res",
      [](const Array& partial, const std::vector<Array>& blocks, const Array& proj_w, const Array& norm_w, float eps,
         const Array& out, uintptr_t stream) {
        const char* op = "attn_res";
        std::vector<TensorView> bv;
        bv.reserve(blocks.size());
        for (size_t i = 0; i < blocks.size(); ++i)
          bv.push_back(view(op, ("blocks[" + std::to_string(i) + "]").c_str(), blocks[i]));
        const TensorView pv = view(op, "partial", partial), jw = view(op, "proj_w", proj_w),
                         nw = view(op, "norm_w", norm_w), ov = view(op, "out", out);
        const Context ctx = context(stream);
        run([&] { kimi::attn_res(pv, bv, jw, nw, eps, ov, ctx); });
      },
      nb::arg("partial"), nb::arg("blocks"), nb::arg("proj_w"), nb::arg("norm_w"), nb::arg("eps"), nb::arg("out"),
      nb::arg("stream") = 0);
}

}  // namespace kimi::py
