// serve/engine.h: continuous batching over a Model's cache slots, in token ids (no HTTP, no text).
//
// One step thread owns the Model's steps and a Cache of `slots` slots of `ctx_size` tokens, planned once
// (Model::plan(max_batch_tokens, slots)). submit() queues a request (a FIFO bounded at max_queue requests beyond the
// free slots: past that it throws QueueFull). Each step:
//   1. admission: free slots take queued requests in arrival order (Cache::reset; with the prefix cache on, the
//      longest cached proper prefix of the prompt is restored into the slot and prefill continues after it);
//   2. cancelled requests leave their slot;
//   3. pack_step (serve/scheduler.h): every decoding request's next token plus chunked-prefill pieces of the
//      others, at most max_batch_tokens tokens (with the prefix cache on, no piece crosses a multiple of
//      prefix_grid);
//   4. forward_into (LogitsFor::last) and sample_tokens over the rows of the requests whose input ends in this
//      step, each row with its own temperature / top_k / top_p and its draw counter (seed, sequence, step =
//      the request's k-th new token: kimi/ops/sample.h), so a request's tokens do not depend on its batch
//      (up to the forward's own batch dependence, docs/serve.md); with the prefix cache on, a prefill piece that
//      ends on the largest multiple of prefix_grid below its prompt's length leaves a snapshot of its slot in the
//      prefix cache (serve/prefix_cache.h);
//   5. each sampled token goes to its request; a request ends after a stop token (included), when `ends_after`
//      says so (stop strings: the caller's text logic), after max_tokens tokens (length), or on cancel(); its
//      slot is free for the next step.
// The cache holds a request's prompt and every new token but the last, so prompt + max_tokens <= ctx_size keeps
// every request inside its slot (submit checks it).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "kimi/context.h"
#include "kimi/error.h"
#include "kimi/model/model.h"
#include "kimi/tensor.h"
#include "serve/metrics.h"
#include "serve/prefix_cache.h"

namespace kimi::serve {

struct EngineOptions {
  int64_t slots = 8;              // requests generating at once (cache slots)
  int64_t ctx_size = 4096;        // tokens per slot: prompt + new tokens of one request
  int64_t max_batch_tokens = 512; // tokens per step (>= slots: every decoding request fits)
  int64_t max_queue = 256;        // requests waiting for a busy slot beyond which submit() throws QueueFull
  int64_t prefill_align = 64;     // chunked-prefill pieces end on this grid of prompt positions (scheduler.h)
  Context ctx;                    // CPU threads / CUDA stream of the steps
  // Exact prefix caching (serve/prefix_cache.h, docs/serve.md): the most memory its snapshots may hold (0: off),
  // and the grid G of the prefix lengths it snapshots (a positive multiple of prefill_align).
  size_t prefix_cache_bytes = 0;
  int64_t prefix_grid = 256;
};

struct GenerationRequest {
  std::vector<int32_t> prompt;      // >= 1 token ids in [0, vocab)
  int64_t max_tokens = 16;          // >= 1; prompt + max_tokens <= ctx_size
  std::vector<int32_t> stop_tokens; // a sampled stop token ends the request (finish stop; the token is delivered)
  float temperature = 0.f;          // kimi/ops/sample.h
  int top_k = 0;
  float top_p = 1.f;
  uint64_t seed = 0, sequence = 0;  // the draw counter's seed and sequence
  // Called on the step thread with each new token (after it is recorded): true ends the request after it (finish
  // stop). Must be quick and must not call into the Engine.
  std::function<bool(int32_t)> ends_after;
};

enum class Finish : uint8_t { none, stop, length, cancelled, error };

// The caller's side of a submitted request: its tokens as they come, and cancel().
class RequestHandle {
 public:
  struct Update {
    std::vector<int32_t> tokens;  // new since the last wait()
    Finish finish = Finish::none; // set once, with the last tokens
    std::string error;            // finish == error: why
  };
  // Waits until there are new tokens or the request has ended, at most `timeout`; returns what is new.
  Update wait(std::chrono::milliseconds timeout);
  // Ends the request at the next step (finish cancelled unless it ended already); its slot is freed.
  void cancel();
  bool cancelled() const;
  int64_t prompt_tokens() const { return prompt_tokens_; }

 private:
  friend class Engine;
  explicit RequestHandle(int64_t prompt_tokens) : prompt_tokens_(prompt_tokens) {}
  void deliver(int32_t token, Finish finish, const std::string& error = {});
  void end(Finish finish, const std::string& error = {});

  const int64_t prompt_tokens_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int32_t> pending_;
  Finish finish_ = Finish::none;
  bool finish_taken_ = false;
  std::string error_;
  bool cancel_ = false;
};

// Thrown by Engine::submit when max_queue requests are waiting already.
struct QueueFull : Error {
  using Error::Error;
};

class Engine {
 public:
  // Validates the options (kimi::Error naming the field: slots, ctx_size, max_batch_tokens, max_queue,
  // prefill_align, prefix_grid), plans the
  // model, allocates the cache and starts the step thread. The model must outlive the engine.
  Engine(const model::Model& model, EngineOptions opt);
  ~Engine();  // stop()
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request; kimi::Error naming the field for an invalid one, QueueFull when the queue is full.
  std::shared_ptr<RequestHandle> submit(GenerationRequest r);
  // Ends every request (finish cancelled) and joins the step thread; idempotent.
  void stop();

  const EngineOptions& options() const { return opt_; }
  const Metrics& metrics() const { return metrics_; }
  int64_t steps() const;  // steps run so far

 private:
  struct Waiting {
    std::shared_ptr<RequestHandle> handle;
    GenerationRequest req;
    std::chrono::steady_clock::time_point arrived;
  };
  struct Running;
  struct SampleBuffers;
  void loop();
  // A step's results for the request threads: a sampled token (or none) and how the request ended (or not yet).
  struct Outgoing {
    std::shared_ptr<RequestHandle> handle;
    int32_t token = -1;  // -1: no token
    Finish finish = Finish::none;
    std::string error;
  };
  void step(std::vector<Running>& running);
  void finish(Running& r, Finish f, const std::string& error = {});
  // finish() without telling the request thread yet: the end goes to the outbox after r's last token.
  void finish_later(Running& r, Finish f, const std::string& error = {});
  // Hands the outbox to the request threads in order (deliver, then end).
  void flush_outbox();
  void restore_prefix(Running& r);
  void snapshot_prefix(const Running& r, int64_t end);

  const model::Model& model_;
  EngineOptions opt_;
  Metrics metrics_;
  model::Cache cache_;
  Tensor logits_;  // [slots, vocab] f32 on the head's device: a step's LogitsFor::last rows
  std::unique_ptr<SampleBuffers> sample_;
  std::unique_ptr<PrefixCache> prefix_;  // null: prefix caching off
  // The last step's results, handed over while the next step runs on the GPU (flush_outbox): waking the request
  // threads costs the step thread ~1-3 us per request, which would otherwise sit between two steps.
  std::vector<Outgoing> outbox_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Waiting> queue_;
  std::vector<int64_t> free_slots_;  // slots no request holds (the step thread takes and returns them)
  bool stop_ = false;
  int64_t steps_ = 0;
  std::thread thread_;
};

}  // namespace kimi::serve
