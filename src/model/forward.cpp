// src/model/forward.cpp: Model and forward() of kimi/model/model.h: the decoder loop (SPEC 1, 8).
#include <cstring>
#include <string>
#include <vector>

#include "core/check.h"
#include "kimi/model/model.h"
#include "kimi/ops/attn_res.h"
#include "kimi/ops/linear.h"
#include "kimi/ops/norm.h"
#include "model/blocks.h"
#include "model/weights.h"

namespace kimi::model {

Model::Model(const std::string& dir) : files_(open_model(dir)), weights_(new ModelWeights(bind_weights(files_))) {}
Model::~Model() = default;

namespace {

// Validates the batch against the model and the cache; resolves the Step.
Step make_step(const Config& c, const Cache& cache, const Batch& b) {
  const check::Checker k("forward");
  cache.check_matches(c);
  const int64_t T = int64_t(b.tokens.size());
  Step s;
  // offsets: the operators' cu_seqlens rules (>= 2 offsets, from 0, non-decreasing, ending at T), then >= 1 token each
  s.cu_t = Tensor(DType::i64, {int64_t(b.cu_seqlens.size())});
  if (!b.cu_seqlens.empty()) std::memcpy(s.cu_t.data(), b.cu_seqlens.data(), b.cu_seqlens.size() * sizeof(int64_t));
  s.cu = k.cu_seqlens("batch.cu_seqlens", s.cu_t, T);
  s.T = T, s.N = int64_t(s.cu.size()) - 1;
  for (int64_t n = 0; n < s.N; ++n)
    if (s.len(n) < 1)
      k.fail("batch.cu_seqlens", "every sequence >= 1 token (increasing offsets)",
             "sequence " + std::to_string(n) + " has " + std::to_string(s.len(n)));
  for (int64_t t = 0; t < T; ++t)
    if (b.tokens[size_t(t)] < 0 || b.tokens[size_t(t)] >= c.vocab_size)
      k.fail("batch.tokens", "token ids in [0, vocab_size = " + std::to_string(c.vocab_size) + ")",
             "tokens[" + std::to_string(t) + "] = " + std::to_string(b.tokens[size_t(t)]));
  if (int64_t(b.slots.size()) != s.N)
    k.fail("batch.slots", std::to_string(s.N) + " slots (one per sequence)", std::to_string(b.slots.size()));
  s.slot_t = Tensor(DType::i64, {s.N});
  std::memcpy(s.slot_t.data(), b.slots.data(), b.slots.size() * sizeof(int64_t));
  s.slot = k.slots("batch.slots", s.slot_t, s.N, "cache", cache.max_seqs(), true);
  s.decode = true;
  for (int64_t n = 0; n < s.N; ++n) {
    const int64_t start = cache.length(s.slot[size_t(n)]);
    if (start + s.len(n) > cache.max_len())
      k.fail("batch", "at most max_len = " + std::to_string(cache.max_len()) + " tokens per cache slot",
             "slot " + std::to_string(s.slot[size_t(n)]) + " would hold " + std::to_string(start) + " + " +
                 std::to_string(s.len(n)));
    s.start.push_back(start);
    s.decode = s.decode && s.len(n) == 1;
  }
  return s;
}

// x[t] = embed[tokens[t]] as f32.
void embed(const TensorView& table, std::span<const int32_t> tokens, const Tensor& x) {
  const int64_t d = table.size(1);
  for (size_t t = 0; t < tokens.size(); ++t) {
    const char* row = static_cast<const char*>(table.data) + size_t(tokens[t]) * size_t(table.stride(0)) * table.element_size();
    for (int64_t i = 0; i < d; ++i) x.data_as<float>()[int64_t(t) * d + i] = load_as_f32(row, table.dtype, i);
  }
}

}  // namespace

Tensor forward(const Model& model, Cache& cache, const Batch& batch, const ForwardOptions& opt, const Context& ctx) {
  const Config& c = model.config();
  const ModelWeights& w = model.weights();
  const Step s = make_step(c, cache, batch);
  const int64_t T = s.T, d = c.hidden_size;
  const float eps = c.rms_norm_eps;

  // The layers update the slots' caches in place: if anything throws midway (a callback, memory, a backend
  // error), the batch's slots are emptied so that they are never left half-advanced.
  Tensor logits;
  try {
    Tensor h(DType::f32, {T, d}), xn(DType::f32, {T, d}), mixed(DType::f32, {T, d});
    embed(w.embed, batch.tokens, h);
    if (opt.on_layer) opt.on_layer(-1, h);

    auto mixer = [&](int64_t i, TensorView x, TensorView out, float beta) {
      const LayerWeights& L = w.layers[size_t(i)];
      if (c.is_kda_layer(i)) {
        kda_block(c, L.kda, cache.layer(i), s, x, out, beta, ctx);
      } else {
        mla_block(c, L.mla, cache.layer(i), s, x, out, beta, ctx);
      }
    };

    TensorView last;  // the stream the final norm reads
    std::vector<Tensor> blocks;  // Block AttnRes: sealed blocks [T, d]
    if (!c.attn_res_block_size) {
      // Plain pre-norm: h += Mixer(RMSNorm(h)); h += FFN(RMSNorm(h)).
      for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
        const LayerWeights& L = w.layers[size_t(i)];
        rms_norm(h, L.input_norm, eps, xn, ctx);
        mixer(i, xn, h, 1.f);
        rms_norm(h, L.post_norm, eps, xn, ctx);
        ffn_block(c, L.ffn, xn, h, 1.f, ctx);
        if (opt.on_layer) opt.on_layer(i, h);
      }
      last = h;
    } else {
      // Block Attention Residuals (SPEC 8): `partial` sums the outputs since the last sealed block.
      const int64_t Bk = *c.attn_res_block_size;
      Tensor partial = std::move(h);
      std::vector<TensorView> views;
      auto mix = [&](TensorView proj, TensorView norm) -> TensorView {
        if (blocks.empty()) return partial.view();
        views.assign(blocks.begin(), blocks.end());
        attn_res(partial, views, proj, norm, eps, mixed, ctx);
        return mixed.view();
      };
      for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
        const LayerWeights& L = w.layers[size_t(i)];
        const TensorView hin = mix(L.attn_res_proj, L.attn_res_norm);
        rms_norm(hin, L.input_norm, eps, xn, ctx);
        float beta = 1.f;
        if (i % Bk == 0) {  // seal: the running sum becomes a block, the new partial starts at this mixer
          blocks.push_back(std::move(partial));
          partial = Tensor(DType::f32, {T, d});
          beta = 0.f;
        }
        mixer(i, xn, partial, beta);
        rms_norm(mix(L.mlp_res_proj, L.mlp_res_norm), L.post_norm, eps, xn, ctx);
        ffn_block(c, L.ffn, xn, partial, 1.f, ctx);
        if (opt.on_layer) opt.on_layer(i, partial);
      }
      last = mix(w.out_res_proj, w.out_res_norm);
      h = std::move(partial);  // keeps `last` alive when it is the partial itself
    }

    // Final norm and lm_head on the rows that need logits.
    const bool all = opt.logits == LogitsFor::all;
    const int64_t R = all ? T : s.N;
    Tensor sel(DType::f32, {R, d});
    logits = Tensor(DType::f32, {R, c.vocab_size});
    for (int64_t r = 0; r < R; ++r) {
      const int64_t t = all ? r : s.cu[size_t(r + 1)] - 1;
      std::memcpy(sel.data_as<float>() + r * d, static_cast<const float*>(last.data) + t * last.stride(0), size_t(d) * 4);
    }
    rms_norm(sel, w.final_norm, eps, sel, ctx);
    linear(sel, w.lm_head, logits, 0.f, ctx);
  } catch (...) {
    for (int64_t n = 0; n < s.N; ++n) cache.reset(s.slot[size_t(n)]);
    throw;
  }
  for (int64_t n = 0; n < s.N; ++n) cache.advance(s.slot[size_t(n)], s.len(n));
  return logits;
}

}  // namespace kimi::model
