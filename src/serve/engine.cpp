// Implementation of serve/engine.h.
#include "serve/engine.h"

#include <algorithm>
#include <new>

#include "kimi/device.h"
#include "kimi/model/generate.h"
#include "kimi/ops/sample.h"
#include "serve/scheduler.h"

namespace kimi::serve {

// ---- RequestHandle ------------------------------------------------------------------------------

RequestHandle::Update RequestHandle::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait_for(lk, timeout, [&] { return !pending_.empty() || (finish_ != Finish::none && !finish_taken_); });
  Update u;
  u.tokens.swap(pending_);
  if (finish_ != Finish::none && !finish_taken_) u.finish = finish_, u.error = error_, finish_taken_ = true;
  return u;
}

void RequestHandle::cancel() {
  const std::lock_guard<std::mutex> lk(mu_);
  cancel_ = true;
}

bool RequestHandle::cancelled() const {
  const std::lock_guard<std::mutex> lk(mu_);
  return cancel_;
}

void RequestHandle::deliver(int32_t token, Finish finish, const std::string& error) {
  {
    const std::lock_guard<std::mutex> lk(mu_);
    pending_.push_back(token);
    if (finish != Finish::none && finish_ == Finish::none) finish_ = finish, error_ = error;
  }
  cv_.notify_all();
}

void RequestHandle::end(Finish finish, const std::string& error) {
  {
    const std::lock_guard<std::mutex> lk(mu_);
    if (finish_ == Finish::none) finish_ = finish, error_ = error;
  }
  cv_.notify_all();
}

// ---- Engine -------------------------------------------------------------------------------------

struct Engine::Running {
  std::shared_ptr<RequestHandle> handle;
  GenerationRequest req;
  int64_t slot = 0;
  int64_t prefilled = 0;   // prompt tokens in the slot
  std::vector<int32_t> generated;
  std::chrono::steady_clock::time_point last;  // arrival, then the last token's time
  Finish done = Finish::none;
};

namespace {

EngineOptions checked(const model::Model& m, EngineOptions o) {
  auto fail = [](const std::string& field, const std::string& expected, int64_t got) {
    throw Error("serve: " + field + ": expected " + expected + ", got " + std::to_string(got));
  };
  if (o.slots < 1 || o.slots > 4096) fail("slots", "a value in [1, 4096]", o.slots);
  const int64_t limit = model::context_limit(m.config());
  if (o.ctx_size < 2 || o.ctx_size > limit)
    fail("ctx_size", "a value in [2, " + std::to_string(limit) + "] (the model's context limit)", o.ctx_size);
  if (o.max_batch_tokens < o.slots || o.max_batch_tokens > (int64_t(1) << 20))
    fail("max_batch_tokens", "a value in [slots = " + std::to_string(o.slots) +
                                 ", 2^20] (every decoding request takes one token of each step)",
         o.max_batch_tokens);
  if (o.max_queue < 0) fail("max_queue", "a value >= 0", o.max_queue);
  if (o.prefill_align < 1) fail("prefill_align", "a value >= 1", o.prefill_align);
  if (o.prefix_grid < 1 || o.prefix_grid % o.prefill_align != 0)
    fail("prefix_grid", "a positive multiple of prefill_align = " + std::to_string(o.prefill_align), o.prefix_grid);
  return o;
}

double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

// sample_tokens' per-row inputs for up to `slots` rows, packed in one host buffer (page-locked when the head is a
// GPU) and its twin on the head's device, so that a step uploads them in ONE copy (kimi/ops/sample.h); and the
// picked tokens. Layout (S = slots): seed, sequence, step i64 [S] each, then temperature, top_p f32 [S], top_k
// i32 [S]: every array starts 8-byte aligned.
struct Engine::SampleBuffers {
  static constexpr int64_t kRowBytes = 3 * 8 + 3 * 4;
  SampleBuffers(int64_t S, Device d) : slots(S), host(DType::u8, {S * kRowBytes}), picked(DType::i32, {S}) {
    if (d == Device::cpu()) return;
    pinned = std::make_unique<PinnedHost>(host.view());
    dev = Tensor(DType::u8, {S * kRowBytes}, d), d_picked = Tensor(DType::i32, {S}, d);
  }
  // Parameter k (0 seed, 1 sequence, 2 step, 3 temperature, 4 top_p, 5 top_k) over rows [0, A) of buffer t.
  TensorView param(const Tensor& t, int k, int64_t A) const {
    static constexpr DType kType[] = {DType::i64, DType::i64, DType::i64, DType::f32, DType::f32, DType::i32};
    int64_t offset = 0;
    for (int j = 0; j < k; ++j) offset += slots * int64_t(dtype_size(kType[j]));
    return TensorView(static_cast<uint8_t*>(t.view().data) + offset, kType[k], {A}, t.view().device);
  }
  int64_t slots;
  Tensor host, picked, dev, d_picked;
  std::unique_ptr<PinnedHost> pinned;
};

Engine::Engine(const model::Model& model, EngineOptions opt)
    : model_(model), opt_(checked(model, std::move(opt))), metrics_(opt_.slots),
      cache_(model, opt_.slots, opt_.ctx_size),
      logits_(Tensor::uninitialized(DType::f32, {opt_.slots, model.config().vocab_size}, model.placement().head)),
      sample_(std::make_unique<SampleBuffers>(opt_.slots, model.placement().head)) {
  for (int64_t s = opt_.slots - 1; s >= 0; --s) free_slots_.push_back(s);
  if (opt_.prefix_cache_bytes > 0) prefix_ = std::make_unique<PrefixCache>(opt_.prefix_cache_bytes, opt_.prefix_grid);
  model_.plan(opt_.max_batch_tokens, opt_.slots);
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() { stop(); }

void Engine::stop() {
  {
    const std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

int64_t Engine::steps() const {
  const std::lock_guard<std::mutex> lk(mu_);
  return steps_;
}

std::shared_ptr<RequestHandle> Engine::submit(GenerationRequest r) {
  const int64_t V = model_.config().vocab_size, P = int64_t(r.prompt.size());
  if (P < 1) throw Error("serve: prompt: expected at least 1 token, got 0");
  for (size_t i = 0; i < r.prompt.size(); ++i)
    if (r.prompt[i] < 0 || r.prompt[i] >= V)
      throw Error("serve: prompt[" + std::to_string(i) + "]: expected a token id in [0, " + std::to_string(V) +
                  "), got " + std::to_string(r.prompt[i]));
  if (P >= opt_.ctx_size)
    throw Error("serve: prompt: expected fewer than ctx_size = " + std::to_string(opt_.ctx_size) +
                " tokens (room for one new token), got " + std::to_string(P));
  if (r.max_tokens < 1 || r.max_tokens > opt_.ctx_size - P)
    throw Error("serve: max_tokens: expected a value in [1, " + std::to_string(opt_.ctx_size - P) + "] (ctx_size " +
                std::to_string(opt_.ctx_size) + " less the prompt's " + std::to_string(P) + " tokens), got " +
                std::to_string(r.max_tokens));
  for (size_t i = 0; i < r.stop_tokens.size(); ++i)
    if (r.stop_tokens[i] < 0 || r.stop_tokens[i] >= V)
      throw Error("serve: stop_tokens[" + std::to_string(i) + "]: expected a token id in [0, " + std::to_string(V) +
                  "), got " + std::to_string(r.stop_tokens[i]));
  if (!(r.temperature >= 0.f && r.temperature < 1e30f) || r.top_k < 0 || !(r.top_p > 0.f && r.top_p <= 1.f))
    throw Error("serve: sampling: expected temperature >= 0, top_k >= 0 and top_p in (0, 1], got " +
                std::to_string(r.temperature) + ", " + std::to_string(r.top_k) + ", " + std::to_string(r.top_p));
  auto h = std::shared_ptr<RequestHandle>(new RequestHandle(P));
  {
    const std::lock_guard<std::mutex> lk(mu_);
    if (stop_) throw Error("serve: the engine is stopping");
    // Requests that a free slot takes at the next step are not waiting: only those beyond the free slots count.
    if (int64_t(queue_.size()) >= opt_.max_queue + int64_t(free_slots_.size())) {
      metrics_.add_rejected();
      throw QueueFull("serve: the queue is full (" + std::to_string(opt_.max_queue) +
                      " requests waiting for a slot); retry later");
    }
    queue_.push_back({h, std::move(r), std::chrono::steady_clock::now()});
    metrics_.queued();
  }
  cv_.notify_all();
  return h;
}

void Engine::finish_later(Running& r, Finish f, const std::string& error) {
  r.done = f;
  metrics_.finished(f == Finish::stop     ? FinishReason::stop
                    : f == Finish::length ? FinishReason::length
                    : f == Finish::cancelled ? FinishReason::cancelled
                                             : FinishReason::error,
                    r.slot >= 0);
  outbox_.push_back({r.handle, -1, f, error});
}

void Engine::finish(Running& r, Finish f, const std::string& error) {
  flush_outbox();  // r's earlier tokens first
  finish_later(r, f, error);
  flush_outbox();
}

void Engine::flush_outbox() {
  for (Outgoing& o : outbox_) {
    if (o.token >= 0) o.handle->deliver(o.token, Finish::none);
    if (o.finish != Finish::none) o.handle->end(o.finish, o.error);
  }
  outbox_.clear();
}

// The longest cached proper prefix of r's prompt into its (reset) slot; prefill continues after it.
void Engine::restore_prefix(Running& r) {
  const model::Cache::Snapshot* s = prefix_->find(r.req.prompt);
  if (s) {
    cache_.restore(r.slot, *s, opt_.ctx);
    r.prefilled = s->length();
  }
  metrics_.prefix_lookup(r.prefilled);
}

// After a step whose prefill piece of r ended at prompt position `end`: a snapshot of r's slot when `end` is the
// largest multiple of the grid below the prompt's length and no entry holds that prefix yet. A snapshot that cannot
// be allocated is skipped: the cache is an optimisation, the request goes on.
void Engine::snapshot_prefix(const Running& r, int64_t end) {
  const int64_t G = prefix_->grid(), P = int64_t(r.req.prompt.size());
  if (end == 0 || end != (P - 1) / G * G) return;
  const std::span<const int32_t> prefix(r.req.prompt.data(), size_t(end));
  if (prefix_->contains(prefix)) return;
  try {
    prefix_->insert(prefix, cache_.snapshot(r.slot, opt_.ctx));
  } catch (const std::bad_alloc&) {
    return;
  } catch (const Error&) {  // device memory exhausted (the allocation's error)
    return;
  }
  metrics_.prefix_held(prefix_->bytes(), prefix_->entries());
}

void Engine::loop() {
  std::vector<Running> running;
  for (;;) {
    size_t admitted_from = 0;  // running[admitted_from...] joined in this step's admission
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !queue_.empty() || !running.empty(); });
      if (stop_) break;
      // Requests cancelled while waiting leave the queue; then free slots take the oldest.
      for (auto it = queue_.begin(); it != queue_.end();) {
        if (it->handle->cancelled()) {
          Running gone{it->handle, {}, -1, 0, {}, it->arrived, Finish::none};
          finish(gone, Finish::cancelled);
          it = queue_.erase(it);
        } else {
          ++it;
        }
      }
      admitted_from = running.size();
      while (!free_slots_.empty() && !queue_.empty()) {
        Waiting w = std::move(queue_.front());
        queue_.pop_front();
        Running r{std::move(w.handle), std::move(w.req), free_slots_.back(), 0, {}, w.arrived, Finish::none};
        free_slots_.pop_back();
        metrics_.admitted();
        cache_.reset(r.slot);
        running.push_back(std::move(r));
      }
    }
    // The admitted requests' cached prefixes, outside the lock (a snapshot's copy takes a while).
    for (size_t i = admitted_from; prefix_ && i < running.size(); ++i) {
      try {
        restore_prefix(running[i]);
      } catch (const std::exception& e) {  // a device error while copying: the request ends with it
        finish(running[i], Finish::error, e.what());
      }
    }
    for (Running& r : running)
      if (r.done == Finish::none && r.handle->cancelled()) finish(r, Finish::cancelled);
    try {
      if (std::any_of(running.begin(), running.end(), [](const Running& r) { return r.done == Finish::none; }))
        step(running);
    } catch (const std::exception& e) {  // a failed step (e.g. a device error): its requests end with the error
      for (Running& r : running)
        if (r.done == Finish::none) finish(r, Finish::error, e.what());
    }
    // With no request left to step, nothing would hand the outbox over: now.
    if (std::none_of(running.begin(), running.end(), [](const Running& r) { return r.done == Finish::none; }))
      flush_outbox();
    const std::lock_guard<std::mutex> lk(mu_);
    for (auto it = running.begin(); it != running.end();) {
      if (it->done != Finish::none) {
        free_slots_.push_back(it->slot);
        it = running.erase(it);
      } else {
        ++it;
      }
    }
    ++steps_;
  }
  flush_outbox();
  // Stopping: every request still here ends.
  for (Running& r : running)
    if (r.done == Finish::none) finish(r, Finish::cancelled, "the server is stopping");
  const std::lock_guard<std::mutex> lk(mu_);
  for (Waiting& w : queue_) {
    Running gone{w.handle, {}, -1, 0, {}, w.arrived, Finish::none};
    finish(gone, Finish::cancelled, "the server is stopping");
  }
  queue_.clear();
}

void Engine::step(std::vector<Running>& running) {
  std::vector<Running*> live;
  std::vector<SeqProgress> progress;
  for (Running& r : running)
    if (r.done == Finish::none) live.push_back(&r), progress.push_back({int64_t(r.req.prompt.size()), r.prefilled});
  const StepPacking p = pack_step(progress, opt_.max_batch_tokens, opt_.prefill_align, prefix_ ? opt_.prefix_grid : 0);

  std::vector<int32_t> tokens;
  std::vector<int64_t> cu{0}, slots;
  int64_t prompt_tokens = 0;
  for (const Piece& q : p.pieces) {
    const Running& r = *live[size_t(q.seq)];
    if (q.decode) {
      tokens.push_back(r.generated.back());
    } else {
      tokens.insert(tokens.end(), r.req.prompt.begin() + q.begin, r.req.prompt.begin() + q.begin + q.count);
      prompt_tokens += q.count;
    }
    cu.push_back(int64_t(tokens.size()));
    slots.push_back(r.slot);
  }
  const int64_t N = int64_t(p.pieces.size()), A = p.sampled;
  const Device dh = model_.placement().head;
  const TensorView logits = logits_.view().slice(0, 0, N);
  // The previous step's tokens reach their requests while this step runs: after the launch when the head is a GPU
  // (the forward is queued, not waited for), before it on the host (there the forward runs in the call).
  const bool queued = model_.placement().head != Device::cpu();
  if (!queued) flush_outbox();
  model::forward_into(model_, cache_, {tokens, cu, slots}, logits, {}, opt_.ctx);
  if (queued) flush_outbox();
  metrics_.add_prompt_tokens(prompt_tokens);
  for (const Piece& q : p.pieces) {
    if (q.decode) continue;
    live[size_t(q.seq)]->prefilled += q.count;
    if (prefix_) snapshot_prefix(*live[size_t(q.seq)], q.begin + q.count);
  }
  if (A == 0) return;

  // Per-row sampling parameters on the host (filled while the forward runs), then one copy to the head's device
  // when it is a GPU.
  SampleBuffers& b = *sample_;
  const TensorView hp[] = {b.param(b.host, 0, A), b.param(b.host, 1, A), b.param(b.host, 2, A),
                           b.param(b.host, 3, A), b.param(b.host, 4, A), b.param(b.host, 5, A)};
  for (int64_t i = 0; i < A; ++i) {
    const Running& r = *live[size_t(p.pieces[size_t(i)].seq)];
    static_cast<int64_t*>(hp[0].data)[i] = int64_t(r.req.seed);
    static_cast<int64_t*>(hp[1].data)[i] = int64_t(r.req.sequence);
    static_cast<int64_t*>(hp[2].data)[i] = int64_t(r.generated.size());
    static_cast<float*>(hp[3].data)[i] = r.req.temperature;
    static_cast<float*>(hp[4].data)[i] = r.req.top_p;
    static_cast<int32_t*>(hp[5].data)[i] = r.req.top_k;
  }
  const bool on_host = dh == Device::cpu();
  if (!on_host) copy(b.dev.view(), b.host.view(), opt_.ctx);
  const Tensor& pb = on_host ? b.host : b.dev;
  const SampleParams sp{b.param(pb, 3, A), b.param(pb, 5, A), b.param(pb, 4, A),
                        b.param(pb, 0, A), b.param(pb, 1, A), b.param(pb, 2, A)};
  const TensorView picked = (on_host ? b.picked : b.d_picked).view().slice(0, 0, A);
  sample_tokens(logits.slice(0, 0, A), sp, picked, opt_.ctx);
  if (!on_host) copy(b.picked.view().slice(0, 0, A), picked, opt_.ctx);
  const int32_t* got = b.picked.data_as<int32_t>();

  const auto now = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < A; ++i) {
    Running& r = *live[size_t(p.pieces[size_t(i)].seq)];
    const int32_t t = got[i];
    if (t < 0) {  // the device refused the row (NaN logits): the request ends with the error
      finish_later(r, Finish::error, "sampling: the logits of this request hold a NaN or no finite maximum");
      continue;
    }
    r.generated.push_back(t);
    metrics_.add_generated(seconds(now - r.last), r.generated.size() == 1);
    r.last = now;
    Finish f = Finish::none;
    if (std::find(r.req.stop_tokens.begin(), r.req.stop_tokens.end(), t) != r.req.stop_tokens.end() ||
        (r.req.ends_after && r.req.ends_after(t))) {
      f = Finish::stop;
    } else if (int64_t(r.generated.size()) >= r.req.max_tokens) {
      f = Finish::length;
    }
    outbox_.push_back({r.handle, t, Finish::none, {}});
    if (f != Finish::none) finish_later(r, f);
  }
}

}  // namespace kimi::serve
