// kimi/profile.h: where the time of a run goes, operator by operator.
//
// While an OpProfiler is alive on a thread, every operator call that thread makes through the public API (and
// the runtime's internal kernels: every registry dispatch) is timed and attributed to (scope, op, device):
//   scope: the innermost ProfileScope open on the thread ("" outside any; the model's forward opens the cost
//          model's layer kinds: embed, kda, mla, dense_ffn, moe, attn_res, head, so that measured time lines up
//          with kimi/model/cost.h's OpCost::layer_kind);
//   op:    the operator's registry name (rms_norm, linear, kda_chunk_fwd, latent_moe, ...);
//   time:  on a GPU, the span between two events recorded on the call's stream around the call (the kernel time
//          plus any idle time of that stream inside the call, e.g. a host sync in the operator); on the host, the
//          call's wall time. An operator that calls other operators is timed once, as itself.
// Timing events are read when results() is called (it waits for every device the profile touched), so profiling
// adds two event records per call and no synchronization inside the run. Without an OpProfiler a call pays one
// thread-local pointer test.
//
// One OpProfiler per thread at a time; ProfileScopes nest (the innermost names the calls).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kimi/tensor.h"

namespace kimi {

struct OpTiming {
  std::string scope, op;
  Device device;
  int64_t calls = 0;
  double ms = 0;  // summed over the calls
};

class OpProfiler {
 public:
  // Installs the profiler on this thread; a kimi::Error if another one is alive on it.
  OpProfiler();
  ~OpProfiler();
  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;

  // Waits for the devices the recorded calls ran on, then returns one OpTiming per (scope, op, device) in order of
  // first call. The records stay (results() can be called again); clear() drops them.
  std::vector<OpTiming> results();
  void clear();

  struct State;

 private:
  std::unique_ptr<State> state_;
};

// Names the operator calls of this thread made while it is alive (no effect without an OpProfiler).
class ProfileScope {
 public:
  explicit ProfileScope(std::string_view name);
  ~ProfileScope();
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  bool active_ = false;
};

}  // namespace kimi
