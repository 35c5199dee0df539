// src/model/forward.cpp: Model and forward() of kimi/model/model.h: the decoder loop (SPEC 1, 8).
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
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
#include "kimi/profile.h"
#include "model/blocks.h"
#include "model/decode_graph.h"
#include "model/mirrored.h"
#include "model/step_plan.h"
#include "model/weights.h"

namespace kimi::model {

Model::Model(const std::string& dir, Device device, const OpSupported& supported, const ExpertFilter& keep_experts)
    : Model(
          dir,
          [&] {
            const Config c = load_model_config(dir);  // the weights are opened once, below
            return plan_placement(c, device, supported ? supported : OpSupported(op_supported));
          }(),
          keep_experts) {}

Model::Model(const std::string& dir, Placement placement, const ExpertFilter& keep_experts)
    : files_(open_model(dir)), config_(files_->config), placement_(std::move(placement)) {
  check_placement_devices(config_, placement_);
  if (keep_experts && !(placement_.device == Device::cpu()))
    throw Error("Model: argument 'keep_experts': expected a CPU model (expert parallelism's holders-only ranks), got "
                "device " + to_string(placement_.device));
  weights_ = std::make_unique<ModelWeights>(bind_weights(*files_, keep_experts));
  for (const LayerWeights& L : weights_->layers)
    for (const MlpWeights& e : L.ffn.experts) every_expert_ = every_expert_ && e.gate.w.present();
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

size_t Model::routed_expert_bytes() const {
  size_t b = 0;
  for (const LayerWeights& L : weights_->layers)
    for (const MlpWeights& e : L.ffn.experts)
      for (const Weight* w : {&e.gate, &e.up, &e.down})
        for (const TensorView* t : {&w->w, &w->scale})
          if (t->present()) b += size_t(t->numel()) * t->element_size();
  return b;
}

StepRuntime& runtime_of(const Model& m) { return *m.runtime_; }

namespace {

// An i64 [n] host view of the batch's values (never absent, even when empty: the checks then report the count).
TensorView host_i64(std::span<const int64_t> v) {
  static int64_t none = 0;
  return TensorView(v.empty() ? &none : const_cast<int64_t*>(v.data()), DType::i64, {int64_t(v.size())});
}

// Validates the batch against the model and the cache into s's offsets, slots and starts (nothing else is
// touched, so a refused batch changes nothing).
void check_step(const Config& c, const Placement& p, const Cache& cache, const Batch& b, Step& s) {
  const check::Checker k("forward");
  cache.check_matches(c);
  cache.check_devices(p);
  const int64_t T = int64_t(b.tokens.size());
  // offsets: the operators' cu_seqlens rules (>= 2 offsets, from 0, non-decreasing, ending at T), then >= 1 token each
  s.cu = k.cu_seqlens("batch.cu_seqlens", host_i64(b.cu_seqlens), T);
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
  s.slot = k.slots("batch.slots", host_i64(b.slots), s.N, "cache", cache.max_seqs(), true);
  s.decode = true;
  s.start.clear();
  for (int64_t n = 0; n < s.N; ++n) {
    const int64_t start = cache.length(s.slot[size_t(n)]);
    if (start + s.len(n) > cache.max_len())
      k.fail("batch", "at most max_len = " + std::to_string(cache.max_len()) + " tokens per cache slot",
             "slot " + std::to_string(s.slot[size_t(n)]) + " would hold " + std::to_string(start) + " + " +
                 std::to_string(s.len(n)));
    s.start.push_back(start);
    s.decode = s.decode && s.len(n) == 1;
  }
}

// An explicit plan must hold a batch of T tokens in N sequences: else a kimi::Error, before anything is written.
void check_plan(const StepRuntime& rt, int64_t T, int64_t N) {
  if (!rt.explicit_plan) return;
  const check::Checker k("forward");
  if (T > rt.limits.tokens)
    k.fail("batch.tokens", "at most " + std::to_string(rt.limits.tokens) + " tokens (Model::plan's max_tokens)",
           std::to_string(T));
  if (N > rt.limits.seqs)
    k.fail("batch.cu_seqlens", "at most " + std::to_string(rt.limits.seqs) + " sequences (Model::plan's max_seqs)",
           std::to_string(N));
}

// Without an explicit plan, the plan grows to hold a batch of T tokens in N sequences and R logits rows.
void grow_plan(const Model& m, StepRuntime& rt, int64_t T, int64_t N, int64_t R) {
  if (rt.explicit_plan) return;
  const StepLimits& l = rt.limits;
  if (T <= l.tokens && N <= l.seqs && R <= l.head_rows) return;
  make_plan(m, rt, {std::max(T, l.tokens), std::max(N, l.seqs), std::max(R, l.head_rows)});
}

// Fills the step's index tables (views into the host workspace, allocated by step_tables): offsets, slots, and
// the MLA tables (every token's position and slot; MLA order: fresh sequences' tokens first).
void fill_tables(Step& s) {
  auto at = [](const TensorView& t) { return static_cast<int64_t*>(t.data); };
  std::copy(s.cu.begin(), s.cu.end(), at(s.cu_t));
  std::copy(s.slot.begin(), s.slot.end(), at(s.slot_t));
  int64_t* pos = at(s.pos_t);
  int64_t* tok_slot = at(s.tok_slot_t);
  int64_t* perm = at(s.mla_perm);
  int64_t* fresh_cu = at(s.fresh_cu_t);
  int64_t fresh = 0, nf = 0;
  fresh_cu[0] = 0;
  for (int64_t n = 0; n < s.N; ++n) {
    for (int64_t t = s.cu[size_t(n)]; t < s.cu[size_t(n + 1)]; ++t)
      pos[t] = s.start[size_t(n)] + (t - s.cu[size_t(n)]), tok_slot[t] = s.slot[size_t(n)];
    if (s.start[size_t(n)] == 0) {
      for (int64_t t = s.cu[size_t(n)]; t < s.cu[size_t(n + 1)]; ++t) perm[fresh++] = t;
      fresh_cu[++nf] = fresh;
    }
  }
  s.fresh_cu_t.shape[0] = nf + 1;  // a prefix of the [N+1] table
  s.mla_fresh = fresh;
  int64_t r = fresh;
  for (int64_t n = 0; n < s.N; ++n)
    if (s.start[size_t(n)] != 0)
      for (int64_t t = s.cu[size_t(n)]; t < s.cu[size_t(n + 1)]; ++t) perm[r++] = t;
  s.mla_reorder = false;
  int64_t* inv = at(s.mla_inv);
  int64_t* lens = at(s.cont_lens_t);
  int64_t* cslot = at(s.cont_slot_t);
  for (int64_t i = 0; i < s.T; ++i) {
    inv[perm[i]] = i;
    s.mla_reorder = s.mla_reorder || perm[i] != i;
    if (i >= fresh) lens[i - fresh] = pos[perm[i]] + 1, cslot[i - fresh] = tok_slot[perm[i]];
  }
  s.cont_lens_t.shape[0] = s.cont_slot_t.shape[0] = s.T - fresh;
}

// The step's device work after the tables are filled: embedding, layers, head, on ctx's stream, reading s's tables,
// the token ids and the head's rows (host views, or their device copies in a graph step). The workspaces are
// rewound to `marks` first (the tables stay), so a step may run its body twice (decode_graph: eager, then
// captured) with the same addresses. The head writes `logits` (the caller's host buffer) when given; when absent
// (a graph step) it writes its device output in one piece and returns it.
TensorView run_body(const Model& model, Cache& cache, StepRuntime& rt, const std::vector<size_t>& marks, const Step& s,
                    TensorView tokens, TensorView rows, int64_t R, TensorView logits, const ForwardOptions& opt,
                    const Context& ctx) {
  const Config& c = model.config();
  const ModelWeights& w = model.weights();
  const Placement& P = model.placement();
  const float eps = c.rms_norm_eps;
  const DType dt = activation_dtype(model, rt);
  for (size_t i = 0; i < marks.size(); ++i) rt.ws.list[i].release(marks[i]);

  // Every stream is a Mirrored [T, d] (src/model/mirrored.h) with a buffer on each block device: a block reads /
  // updates it on its own device, so it crosses devices only where consecutive blocks sit on different ones.
  Streams st = step_streams(rt.ws, model, block_devices(P), s.T, dt, ctx);
  Mirrored& h = st.res[0];
  Mirrored& xn = st.xn;
  {
    const ProfileScope scope("embed");
    gather_rows(w.embed, tokens, h.overwrite(P.embedding), ctx);
  }
  Tensor report_scratch;
  auto report = [&](int64_t layer, Mirrored& x) {
    if (opt.on_layer) opt.on_layer(layer, x.host(report_scratch));
  };
  report(-1, h);

  auto mixer = [&](int64_t i, TensorView x, TensorView out, float beta) {
    const LayerWeights& L = w.layers[size_t(i)];
    Workspace& ws = rt.ws.on(x.device);
    if (c.is_kda_layer(i)) {
      kda_block(c, L.kda, cache.layer(i), s, x, out, beta, ws, ctx);
    } else {
      mla_block(c, L.mla, cache.layer(i), s, x, out, beta, ws, ctx);
    }
  };
  // The profile's scopes (kimi/profile.h) are the cost model's layer kinds (kimi/model/cost.h).
  auto mixer_kind = [&](int64_t i) { return c.is_kda_layer(i) ? "kda" : "mla"; };
  auto ffn_kind = [&](int64_t i) { return c.is_moe_layer(i) ? "moe" : "dense_ffn"; };
  auto ffn = [&](int64_t i, TensorView x, TensorView out) {
    const MoeHook hook = opt.moe ? MoeHook([&](TensorView xi, TensorView y) { opt.moe(i, xi, y); }) : MoeHook();
    ffn_block(c, w.layers[size_t(i)].ffn, x, out, 1.f, rt.ws.on(x.device), ctx, hook);
  };

  Mirrored* last = &h;  // the stream the head reads
  if (!c.attn_res_block_size) {
    // Plain pre-norm: h += Mixer(RMSNorm(h)); h += FFN(RMSNorm(h)), each block on its device.
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      const LayerWeights& L = w.layers[size_t(i)];
      const Device dm = P.layers[size_t(i)].mixer, df = P.layers[size_t(i)].ffn;
      {
        const ProfileScope scope(mixer_kind(i));
        const TensorView hv = h.update(dm);
        rms_norm(hv, L.input_norm, eps, xn.overwrite(dm), ctx);
        mixer(i, xn.read(dm), hv, 1.f);
      }
      {
        const ProfileScope scope(ffn_kind(i));
        const TensorView hv = h.update(df);
        rms_norm(hv, L.post_norm, eps, xn.overwrite(df), ctx);
        ffn(i, xn.read(df), hv);
      }
      report(i, h);
    }
  } else {
    // Block Attention Residuals (SPEC 8): `partial` sums the outputs since the last sealed block; the sealed
    // blocks are st.res[0, sealed), the partial st.res[sealed] (the embedding output before the first seal).
    const int64_t Bk = *c.attn_res_block_size;
    size_t sealed = 0;
    std::vector<TensorView> views;
    // The mix on device dm: the running partial itself while no block is sealed, else attn_res into `mixed`.
    auto mix = [&](Device dm, TensorView proj, TensorView norm) -> Mirrored& {
      Mirrored& partial = st.res[sealed];
      if (sealed == 0) return partial;
      const ProfileScope scope("attn_res");
      views.clear();
      for (size_t b = 0; b < sealed; ++b) views.push_back(st.res[b].read(dm));
      attn_res(partial.read(dm), views, proj, norm, eps, st.mixed.overwrite(dm), ctx);
      return st.mixed;
    };
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      const LayerWeights& L = w.layers[size_t(i)];
      const Placement::Layer& PL = P.layers[size_t(i)];
      Mirrored& hin = mix(PL.attn_mix, L.attn_res_proj, L.attn_res_norm);
      {
        const ProfileScope scope(mixer_kind(i));
        rms_norm(hin.read(PL.mixer), L.input_norm, eps, xn.overwrite(PL.mixer), ctx);
        TensorView out;
        float beta = 1.f;
        if (i % Bk == 0) {  // seal: the running sum becomes a block, the new partial starts at this mixer
          ++sealed;
          out = st.res[sealed].overwrite(PL.mixer);
          beta = 0.f;
        } else {
          out = st.res[sealed].update(PL.mixer);
        }
        mixer(i, xn.read(PL.mixer), out, beta);
      }
      Mirrored& fin = mix(PL.ffn_mix, L.mlp_res_proj, L.mlp_res_norm);
      {
        const ProfileScope scope(ffn_kind(i));
        rms_norm(fin.read(PL.ffn), L.post_norm, eps, xn.overwrite(PL.ffn), ctx);
        ffn(i, xn.read(PL.ffn), st.res[sealed].update(PL.ffn));
      }
      report(i, st.res[sealed]);
    }
    last = &mix(P.output_mix, w.out_res_proj, w.out_res_norm);
  }

  // Head: the rows that need logits (one gather_rows), final norm into the activation dtype, lm_head; logits
  // are written directly when they live on the head's device (a host head, or a device view from the caller),
  // else copied to the host in pieces of the planned rows (a graph step: all R rows in one piece, returned to
  // the caller on the device).
  const ProfileScope head_scope("head");
  const Device dh = P.head;
  Workspace& hw = rt.ws.on(dh);
  const Workspace::Scope scope(hw);
  const bool direct = logits.present() && logits.device == dh;
  const HeadBuffers hb = head_buffers(hw, c, R, rt.limits.head_rows, dt, direct);
  gather_rows(last->read(dh), rows, hb.sel, ctx);
  rms_norm(hb.sel, w.final_norm, eps, hb.x, ctx);
  if (direct) {
    linear(hb.x, w.lm_head, logits, 0.f, ctx);
    return {};
  }
  const int64_t piece = hb.out.size(0);
  if (!logits.present()) {
    if (piece < R) throw Error("forward: internal: a graph step's head needs its " + std::to_string(R) + " rows at once");
    linear(hb.x, w.lm_head, hb.out, 0.f, ctx);
    return hb.out;
  }
  for (int64_t r0 = 0; r0 < R; r0 += piece) {
    const int64_t r1 = std::min(R, r0 + piece);
    const TensorView out = hb.out.slice(0, 0, r1 - r0);
    linear(hb.x.slice(0, r0, r1), w.lm_head, out, 0.f, ctx);
    copy(logits.slice(0, r0, r1), out, ctx);
  }
  return {};
}

// One step: validates everything (the batch, the cache, the plan's limits, then the logits view that
// `logits_for(R)` gives for the R rows of logits), then runs the model writing the logits there: a decode step
// of a model on one GPU from a CUDA graph (src/model/decode_graph.h), every other step eagerly on ctx. The
// caller advances the slots (Cache::advance) after it returns.
void run_step(const Model& model, Cache& cache, const Batch& batch, const ForwardOptions& opt, const Context& ctx,
              const std::function<TensorView(int64_t R)>& logits_for) {
  const Config& c = model.config();
  const Placement& P = model.placement();
  StepRuntime& rt = runtime_of(model);  // locked by the caller (StepLock)
  Step& s = rt.step;
  if (!model.has_every_expert() && !opt.moe)
    throw Error("forward: the model keeps only some routed experts (its keep_experts filter): it runs only with "
                "ForwardOptions::moe (an expert-parallel step, src/dist)");
  check_step(c, P, cache, batch, s);
  const int64_t T = s.T;
  const bool all = opt.logits == LogitsFor::all;
  const int64_t R = all ? T : s.N;
  check_plan(rt, T, s.N);
  const TensorView logits = logits_for(R);
  {
    const check::Checker k("forward");
    k.present("logits", logits);
    k.dtype("logits", logits, {DType::f32});
    k.shape("logits", logits, {R, c.vocab_size});
    k.contiguous("logits", logits);
    if (!(logits.device == Device::cpu()) && !(logits.device == P.head))
      k.fail("logits", P.head == Device::cpu() ? "device cpu" : "device cpu or " + to_string(P.head) + " (the head's)",
             to_string(logits.device));
  }
  grow_plan(model, rt, T, s.N, R);

  // The step's memory, in the order measure_step (step_plan.cpp) measured it: the host tables (and their device
  // copy on a graph device), the streams, then per block its temporaries (released when it returns), the head.
  rt.ws.reset();
  Workspace& host = rt.ws.on(Device::cpu());
  const StepIndex ix = step_tables(host, s, T, s.N, R);
  const size_t table_bytes = host.used();
  const TensorView dev_tables = device_tables(rt.ws, P, table_bytes);
  fill_tables(s);
  int64_t* tok = static_cast<int64_t*>(ix.tokens.data);
  for (int64_t t = 0; t < T; ++t) tok[t] = batch.tokens[size_t(t)];  // validated ids
  for (int64_t r = 0; r < R; ++r) static_cast<int64_t*>(ix.rows.data)[r] = all ? r : s.cu[size_t(r + 1)] - 1;
  std::vector<size_t> marks;
  for (const Workspace& w : rt.ws.list) marks.push_back(w.used());

  // The layers update the slots' caches in place: if anything throws midway (a callback, memory, a backend
  // error), the batch's slots are emptied so that they are never left half-advanced.
  try {
    std::vector<const void*> arenas;
    for (const Tensor& a : rt.arenas) arenas.push_back(a.data());
    const GraphStep g{s,
                      TensorView(ix.tokens.data, DType::u8, {int64_t(table_bytes)}),  // the host arena's first bytes
                      dev_tables,
                      ix.tokens,
                      ix.rows,
                      R,
                      rt.limits.head_rows,
                      activation_dtype(model, rt),
                      std::move(arenas),
                      cache,
                      c.num_hidden_layers,
                      bool(opt.on_layer) || bool(opt.moe),
                      logits,
                      ctx};
    const GraphBody body = [&](const Step& gs, TensorView tokens, TensorView rows, const Context& gctx) {
      return run_body(model, cache, rt, marks, gs, tokens, rows, R, {}, opt, gctx);
    };
    if (!rt.graphs.run(g, P, body)) run_body(model, cache, rt, marks, s, ix.tokens, ix.rows, R, logits, opt, ctx);
  } catch (...) {
    for (int64_t n = 0; n < s.N; ++n) cache.reset(s.slot[size_t(n)]);
    throw;
  }
}

}  // namespace

void forward_into(const Model& model, Cache& cache, const Batch& batch, TensorView logits, const ForwardOptions& opt,
                  const Context& ctx) {
  const StepLock lock(runtime_of(model), "forward");
  run_step(model, cache, batch, opt, ctx, [&](int64_t) { return logits; });
  const Step& s = runtime_of(model).step;
  for (int64_t n = 0; n < s.N; ++n) cache.advance(s.slot[size_t(n)], s.len(n));
}

Tensor forward(const Model& model, Cache& cache, const Batch& batch, const ForwardOptions& opt, const Context& ctx) {
  const StepLock lock(runtime_of(model), "forward");
  Tensor logits;
  run_step(model, cache, batch, opt, ctx, [&](int64_t R) {
    logits = Tensor(DType::f32, {R, model.config().vocab_size});
    return logits.view();
  });
  const Step& s = runtime_of(model).step;
  for (int64_t n = 0; n < s.N; ++n) cache.advance(s.slot[size_t(n)], s.len(n));
  return logits;
}

}  // namespace kimi::model
