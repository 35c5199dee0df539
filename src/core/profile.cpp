// Implementation of kimi/profile.h and src/core/profile.h.
//
// Each outermost dispatched call appends a Record: its (scope, op, device) entry and either two events recorded on
// the call's stream (a device backend with events) or the host wall time. results() resolves pending records (it
// waits on each record's end event), adds them to their entries and returns the entries' sums. Events are pooled
// per device and destroyed with the profiler.
#include <chrono>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/profile.h"
#include "core/registry.h"
#include "kimi/error.h"

namespace kimi {

struct OpProfiler::State {
  struct Record {
    size_t entry = 0;
    Device device;
    void* begin = nullptr;  // events (device backends); nullptr: host timing in `ms`
    void* end = nullptr;
    void* stream = nullptr;  // the call's stream (Context::cuda_stream)
    std::chrono::steady_clock::time_point t0;
    double ms = 0;
    bool resolved = false;
  };
  std::vector<std::string> scopes;  // the open ProfileScopes, innermost last
  int depth = 0;                    // dispatch nesting of the call being recorded
  std::vector<OpTiming> entries;
  std::map<std::tuple<std::string, std::string, int, int>, size_t> index;  // (scope, op, device) -> entries
  std::vector<Record> records;
  std::map<std::pair<int, int>, std::vector<void*>> free_events, all_events;

  static std::pair<int, int> key(Device d) { return {int(d.type), d.index}; }
  const DeviceRuntime* events(Device d) const {
    if (d.type == DeviceType::cpu) return nullptr;
    const DeviceRuntime& rt = registry().runtime(backend_of(d));
    return rt.event_create ? &rt : nullptr;
  }
  void* event(Device d, const DeviceRuntime& rt) {
    std::vector<void*>& pool = free_events[key(d)];
    if (!pool.empty()) {
      void* e = pool.back();
      pool.pop_back();
      return e;
    }
    void* e = rt.event_create(d);
    all_events[key(d)].push_back(e);
    return e;
  }
  size_t entry(std::string_view op, Device d) {
    const std::string scope = scopes.empty() ? std::string() : scopes.back();
    const auto k = std::make_tuple(scope, std::string(op), int(d.type), d.index);
    const auto it = index.find(k);
    if (it != index.end()) return it->second;
    entries.push_back({scope, std::string(op), d, 0, 0});
    index.emplace(k, entries.size() - 1);
    return entries.size() - 1;
  }
  void resolve() {
    for (Record& r : records) {
      if (r.resolved) continue;
      if (r.begin) {
        const DeviceRuntime& rt = *events(r.device);
        r.ms = rt.event_elapsed_ms(r.device, r.begin, r.end);
        free_events[key(r.device)].push_back(r.begin);
        free_events[key(r.device)].push_back(r.end);
        r.begin = r.end = nullptr;
      }
      OpTiming& e = entries[r.entry];
      e.calls += 1, e.ms += r.ms;
      r.resolved = true;
    }
  }
  ~State() {
    for (auto& [k, evs] : all_events) {
      const Device d{DeviceType(k.first), k.second};
      const DeviceRuntime* rt = events(d);
      for (void* e : evs) rt->event_destroy(d, e);
    }
  }
};

namespace profile {

thread_local OpProfiler::State* t_active = nullptr;

CallTimer::CallTimer(std::string_view op, Device d, const Context& ctx) : state_(t_active) {
  outermost_ = state_->depth++ == 0;
  if (!outermost_) return;
  OpProfiler::State::Record r;
  r.entry = state_->entry(op, d), r.device = d, r.stream = ctx.cuda_stream;
  if (const DeviceRuntime* rt = state_->events(d)) {
    r.begin = state_->event(d, *rt);
    r.end = state_->event(d, *rt);
    rt->event_record(d, r.begin, ctx.cuda_stream);
  } else {
    r.t0 = std::chrono::steady_clock::now();
  }
  state_->records.push_back(r);
  record_ = state_->records.size() - 1;
}

CallTimer::~CallTimer() {
  --state_->depth;
  if (!outermost_) return;
  OpProfiler::State::Record& r = state_->records[record_];
  if (r.begin) {
    // no throw from a destructor: a failed record leaves the event pair unrecorded, read as 0 ms
    try {
      state_->events(r.device)->event_record(r.device, r.end, r.stream);
    } catch (...) {
    }
  } else {
    r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - r.t0).count();
  }
}

}  // namespace profile

OpProfiler::OpProfiler() : state_(std::make_unique<State>()) {
  if (profile::t_active) throw Error("OpProfiler: expected at most one profiler per thread, got a second one");
  profile::t_active = state_.get();
}

OpProfiler::~OpProfiler() { profile::t_active = nullptr; }

std::vector<OpTiming> OpProfiler::results() {
  state_->resolve();
  return state_->entries;
}

void OpProfiler::clear() {
  state_->resolve();
  state_->records.clear();
  state_->entries.clear();
  state_->index.clear();
}

ProfileScope::ProfileScope(std::string_view name) {
  if (!profile::t_active) return;
  profile::t_active->scopes.emplace_back(name);
  active_ = true;
}

ProfileScope::~ProfileScope() {
  if (active_ && profile::t_active && !profile::t_active->scopes.empty()) profile::t_active->scopes.pop_back();
}

}  // namespace kimi
