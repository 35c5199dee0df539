// Implementation of serve/metrics.h.
#include "serve/metrics.h"

#include <algorithm>
#include <fmt/core.h>

namespace kimi::serve {

void Histogram::observe(double v) {
  const size_t b = size_t(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());  // v <= bound
  ++counts_[b];
  sum_ += v;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name) const {
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cum);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count_, name, sum_, name, count_);
}

const char* to_string(FinishReason f) {
  switch (f) {
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::cancelled: return "cancelled";
    case FinishReason::error: return "error";
  }
  return "error";
}

namespace {
std::vector<double> latency_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}
}  // namespace

Metrics::Metrics(int64_t slots) : slots_(slots), ttft_(latency_buckets()), itl_(latency_buckets()) {}

void Metrics::queued() {
  const std::lock_guard<std::mutex> lk(mu_);
  ++waiting_;
}
void Metrics::admitted() {
  const std::lock_guard<std::mutex> lk(mu_);
  --waiting_, ++running_;
}
void Metrics::finished(FinishReason f, bool was_running) {
  const std::lock_guard<std::mutex> lk(mu_);
  --(was_running ? running_ : waiting_);
  ++finished_[int(f)];
}
void Metrics::add_prompt_tokens(int64_t n) {
  const std::lock_guard<std::mutex> lk(mu_);
  prompt_tokens_ += uint64_t(n);
}
void Metrics::add_generated(double seconds, bool first) {
  const std::lock_guard<std::mutex> lk(mu_);
  ++generation_tokens_;
  (first ? ttft_ : itl_).observe(seconds);
}
void Metrics::add_rejected() {
  const std::lock_guard<std::mutex> lk(mu_);
  ++rejected_;
}
void Metrics::prefix_lookup(int64_t reused_tokens) {
  const std::lock_guard<std::mutex> lk(mu_);
  ++(reused_tokens > 0 ? prefix_hits_ : prefix_misses_);
  prefix_reused_ += uint64_t(std::max<int64_t>(reused_tokens, 0));
}
void Metrics::prefix_held(uint64_t bytes, uint64_t entries) {
  const std::lock_guard<std::mutex> lk(mu_);
  prefix_bytes_ = bytes, prefix_entries_ = entries;
}

std::string Metrics::prometheus() const {
  const std::lock_guard<std::mutex> lk(mu_);
  std::string o;
  auto one = [&](const char* name, const char* type, const char* help, auto value) {
    o += fmt::format("# HELP kimi_{} {}\n# TYPE kimi_{} {}\nkimi_{} {}\n", name, help, name, type, name, value);
  };
  one("requests_running", "gauge", "Requests in a cache slot (prefilling or decoding).", running_);
  one("requests_waiting", "gauge", "Requests queued for a cache slot.", waiting_);
  one("cache_slots_used", "gauge", "Cache slots holding a request.", running_);
  one("cache_slots_total", "gauge", "Cache slots (--slots).", slots_);
  o += "# HELP kimi_requests_total Requests that ended, by finish reason.\n# TYPE kimi_requests_total counter\n";
  for (FinishReason f : {FinishReason::stop, FinishReason::length, FinishReason::cancelled, FinishReason::error})
    o += fmt::format("kimi_requests_total{{finish_reason=\"{}\"}} {}\n", to_string(f), finished_[int(f)]);
  one("requests_rejected_total", "counter", "Requests refused with 503 because the queue was full.", rejected_);
  one("prompt_tokens_total", "counter", "Prompt tokens run through the model.", prompt_tokens_);
  one("generation_tokens_total", "counter", "Tokens sampled.", generation_tokens_);
  one("prefix_cache_hits_total", "counter", "Admissions that restored a cached prompt prefix.", prefix_hits_);
  one("prefix_cache_misses_total", "counter", "Admissions (prefix cache on) that found no cached prefix.", prefix_misses_);
  one("prefix_cache_tokens_reused_total", "counter", "Prompt tokens restored from prefix snapshots instead of run.",
      prefix_reused_);
  one("prefix_cache_bytes", "gauge", "Memory the prefix snapshots hold (--prefix-cache-mb bounds it).", prefix_bytes_);
  one("prefix_cache_entries", "gauge", "Prefix snapshots held.", prefix_entries_);
  o += "# HELP kimi_time_to_first_token_seconds From a request's arrival to its first token.\n"
       "# TYPE kimi_time_to_first_token_seconds histogram\n";
  ttft_.render(o, "kimi_time_to_first_token_seconds");
  o += "# HELP kimi_inter_token_latency_seconds Between consecutive tokens of a request.\n"
       "# TYPE kimi_inter_token_latency_seconds histogram\n";
  itl_.render(o, "kimi_inter_token_latency_seconds");
  return o;
}

}  // namespace kimi::serve
