// src/model/forward.cpp: Model and forward() of kimi/model/model.h: the decoder loop (SPEC 1, 8).
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/check.h"
#include "kimi/device.h"
#include "kimi/log.h"
#include "kimi/model/model.h"
#include "kimi/ops/attn_res.h"
#include "kimi/ops/gather.h"
#include "kimi/ops/linear.h"
#include "kimi/ops/norm.h"
#include "model/blocks.h"
#include "model/mirrored.h"
#include "model/weights.h"

namespace kimi::model {

Model::Model(const std::string& dir, Device device, const OpSupported& supported)
    : Model(dir, [&] {
        const Config c = load_model_config(dir);  // the weights are opened once, below
        return plan_placement(c, device, supported ? supported : OpSupported(op_supported));
      }()) {}

Model::Model(const std::string& dir, Placement placement)
    : files_(open_model(dir)), config_(files_->config), placement_(std::move(placement)) {
  check_placement_devices(config_, placement_);
  weights_ = std::make_unique<ModelWeights>(bind_weights(*files_));
  place_weights(*weights_, config_, placement_);
  for (const std::string& n : placement_.notes) note(n);
}
Model::~Model() = default;

size_t Model::device_weight_bytes() const {
  size_t b = 0;
  for (const Tensor& t : weights_->device_copies) b += t.nbytes();
  for (const Tensor& t : weights_->created)
    if (t.device() != Device::cpu()) b += t.nbytes();
  return b;
}

namespace {

// Validates the batch against the model and the cache; resolves the Step.
Step make_step(const Config& c, const Placement& p, const Cache& cache, const Batch& b) {
  const check::Checker k("forward");
  cache.check_matches(c);
  cache.check_devices(p);
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

// i64 [n] host tensor of the given values (the operators' index tensors).
Tensor host_index(const std::vector<int64_t>& v) {
  Tensor t(DType::i64, {int64_t(v.size())});
  std::copy(v.begin(), v.end(), t.data_as<int64_t>());
  return t;
}

}  // namespace

Tensor forward(const Model& model, Cache& cache, const Batch& batch, const ForwardOptions& opt, const Context& ctx) {
  const Config& c = model.config();
  const ModelWeights& w = model.weights();
  const Placement& P = model.placement();
  const Step s = make_step(c, P, cache, batch);
  const int64_t T = s.T, d = c.hidden_size;
  const float eps = c.rms_norm_eps;
  const Device cpu = Device::cpu();

  // The layers update the slots' caches in place: if anything throws midway (a callback, memory, a backend
  // error), the batch's slots are emptied so that they are never left half-advanced.
  Tensor logits;
  try {
    // Every activation is a [T, d] f32 Mirrored (src/model/mirrored.h): a block reads / updates it on its own
    // device, so it crosses devices only where consecutive blocks sit on different ones.
    Mirrored h(T, d, ctx), xn(T, d, ctx), mixed(T, d, ctx);
    const TensorView tokens(const_cast<int32_t*>(batch.tokens.data()), DType::i32, {T});  // host ids, validated
    gather_rows(w.embed, tokens, h.overwrite(P.embedding), ctx);
    auto report = [&](int64_t layer, Mirrored& x) {
      if (opt.on_layer) opt.on_layer(layer, x.read(cpu));
    };
    report(-1, h);

    auto mixer = [&](int64_t i, TensorView x, TensorView out, float beta) {
      const LayerWeights& L = w.layers[size_t(i)];
      if (c.is_kda_layer(i)) {
        kda_block(c, L.kda, cache.layer(i), s, x, out, beta, ctx);
      } else {
        mla_block(c, L.mla, cache.layer(i), s, x, out, beta, ctx);
      }
    };

    Mirrored* last = &h;  // the stream the head reads
    std::vector<std::unique_ptr<Mirrored>> blocks;  // Block AttnRes: sealed blocks [T, d], never written again
    if (!c.attn_res_block_size) {
      // Plain pre-norm: h += Mixer(RMSNorm(h)); h += FFN(RMSNorm(h)), each block on its device.
      for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
        const LayerWeights& L = w.layers[size_t(i)];
        const Device dm = P.layers[size_t(i)].mixer, df = P.layers[size_t(i)].ffn;
        TensorView hv = h.update(dm);
        rms_norm(hv, L.input_norm, eps, xn.overwrite(dm), ctx);
        mixer(i, xn.read(dm), hv, 1.f);
        hv = h.update(df);
        rms_norm(hv, L.post_norm, eps, xn.overwrite(df), ctx);
        ffn_block(c, L.ffn, xn.read(df), hv, 1.f, ctx);
        report(i, h);
      }
    } else {
      // Block Attention Residuals (SPEC 8): `partial` sums the outputs since the last sealed block.
      const int64_t Bk = *c.attn_res_block_size;
      auto partial = std::make_unique<Mirrored>(std::move(h));
      std::vector<TensorView> views;
      // The mix on device dm: the running partial itself while no block is sealed, else attn_res into `mixed`.
      auto mix = [&](Device dm, TensorView proj, TensorView norm) -> Mirrored& {
        if (blocks.empty()) return *partial;
        views.clear();
        for (auto& b : blocks) views.push_back(b->read(dm));
        attn_res(partial->read(dm), views, proj, norm, eps, mixed.overwrite(dm), ctx);
        return mixed;
      };
      for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
        const LayerWeights& L = w.layers[size_t(i)];
        const Placement::Layer& PL = P.layers[size_t(i)];
        Mirrored& hin = mix(PL.attn_mix, L.attn_res_proj, L.attn_res_norm);
        rms_norm(hin.read(PL.mixer), L.input_norm, eps, xn.overwrite(PL.mixer), ctx);
        TensorView out;
        float beta = 1.f;
        if (i % Bk == 0) {  // seal: the running sum becomes a block, the new partial starts at this mixer
          blocks.push_back(std::move(partial));
          partial = std::make_unique<Mirrored>(T, d, ctx);
          out = partial->overwrite(PL.mixer);
          beta = 0.f;
        } else {
          out = partial->update(PL.mixer);
        }
        mixer(i, xn.read(PL.mixer), out, beta);
        Mirrored& fin = mix(PL.ffn_mix, L.mlp_res_proj, L.mlp_res_norm);
        rms_norm(fin.read(PL.ffn), L.post_norm, eps, xn.overwrite(PL.ffn), ctx);
        ffn_block(c, L.ffn, xn.read(PL.ffn), partial->update(PL.ffn), 1.f, ctx);
        report(i, *partial);
      }
      last = &mix(P.output_mix, w.out_res_proj, w.out_res_norm);
      blocks.push_back(std::move(partial));  // keeps `last` alive when it is the partial itself
    }

    // Head: the rows that need logits (one gather_rows), final norm, lm_head; logits come back to the host.
    const bool all = opt.logits == LogitsFor::all;
    const int64_t R = all ? T : s.N;
    std::vector<int64_t> rows(static_cast<size_t>(R));
    for (int64_t r = 0; r < R; ++r) rows[size_t(r)] = all ? r : s.cu[size_t(r + 1)] - 1;
    const Device dh = P.head;
    Tensor sel(DType::f32, {R, d}, dh), out(DType::f32, {R, c.vocab_size}, dh);
    gather_rows(last->read(dh), host_index(rows), sel, ctx);
    rms_norm(sel, w.final_norm, eps, sel, ctx);
    linear(sel, w.lm_head, out, 0.f, ctx);
    if (dh == cpu) {
      logits = std::move(out);
    } else {
      logits = Tensor(DType::f32, {R, c.vocab_size});
      copy(logits, out, ctx);
    }
  } catch (...) {
    for (int64_t n = 0; n < s.N; ++n) cache.reset(s.slot[size_t(n)]);
    throw;
  }
  for (int64_t n = 0; n < s.N; ++n) cache.advance(s.slot[size_t(n)], s.len(n));
  return logits;
}

}  // namespace kimi::model
