// serve/metrics.h: the engine's counters, gauges and latency histograms, and their Prometheus text (GET /metrics).
//
// Names (all prefixed kimi_):
//   requests_running        gauge    requests in a cache slot (prefilling or decoding)
//   requests_waiting        gauge    requests queued for a slot
//   cache_slots_used        gauge    == requests_running;  cache_slots_total  gauge  (--slots)
//   requests_total{finish_reason="stop|length|cancelled|error"}  counter  requests that ended
//   requests_rejected_total counter  requests refused because the queue was full (HTTP 503)
//   prompt_tokens_total     counter  prompt tokens run through the model (prefill)
//   generation_tokens_total counter  tokens sampled (every request's completion_tokens, summed)
//   time_to_first_token_seconds  histogram  submit -> first sampled token, one observation per request that got one
//   inter_token_latency_seconds  histogram  between consecutive tokens of a request: one observation per token
//                                           after a request's first, so its count = generation_tokens_total -
//                                           time_to_first_token_seconds_count
//   prefix_cache_hits_total / prefix_cache_misses_total  counter  admissions that restored a cached prefix / found
//                                           none (counted only with the prefix cache on)
//   prefix_cache_tokens_reused_total  counter  prompt tokens restored from snapshots instead of run (so a request's
//                                           prompt tokens = its part of prompt_tokens_total + its reused tokens)
//   prefix_cache_bytes, prefix_cache_entries  gauge  memory the snapshots hold, and their number
// Histograms are cumulative (le buckets, +Inf = count) with _sum and _count, as Prometheus expects.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace kimi::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double v);
  // "<name>_bucket{le=...} n" lines, _sum and _count.
  void render(std::string& out, const std::string& name) const;
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); the last is above every bound
  double sum_ = 0;
  uint64_t count_ = 0;
};

enum class FinishReason : uint8_t { stop, length, cancelled, error };
const char* to_string(FinishReason f);

// Everything GET /metrics shows; updated by the engine (its step thread and submit), read by the HTTP threads.
// The engine records each event before the request's client can see its effect (a token, the end), so a client
// that reads /metrics after its response sees the request counted and out of the gauges.
class Metrics {
 public:
  explicit Metrics(int64_t slots);
  void queued();                                                  // waiting + 1
  void admitted();                                                // waiting - 1, running + 1
  void finished(FinishReason f, bool was_running);                // running (or waiting) - 1, requests_total[f] + 1
  void add_prompt_tokens(int64_t n);
  void add_generated(double seconds_since_previous, bool first);  // one sampled token (first: TTFT, else ITL)
  void add_rejected();
  void prefix_lookup(int64_t reused_tokens);            // an admission: a hit when reused_tokens > 0, else a miss
  void prefix_held(uint64_t bytes, uint64_t entries);   // the prefix cache's size now
  std::string prometheus() const;

 private:
  mutable std::mutex mu_;
  int64_t slots_, running_ = 0, waiting_ = 0;
  uint64_t prompt_tokens_ = 0, generation_tokens_ = 0, rejected_ = 0;
  uint64_t finished_[4] = {};
  uint64_t prefix_hits_ = 0, prefix_misses_ = 0, prefix_reused_ = 0, prefix_bytes_ = 0, prefix_entries_ = 0;
  Histogram ttft_, itl_;
};

}  // namespace kimi::serve
