// src/core/profile.h: the hook of kimi/profile.h inside dispatch() (src/core/registry.h).
//
// active() is one thread-local pointer test. CallTimer brackets one dispatched call: the outermost call of the
// thread is recorded (an operator that dispatches other operators is timed once, as itself).
#pragma once

#include <string_view>

#include "kimi/context.h"
#include "kimi/profile.h"
#include "kimi/tensor.h"

namespace kimi::profile {

extern thread_local OpProfiler::State* t_active;  // the thread's profiler (nullptr: none)

inline bool active() { return t_active != nullptr; }

class CallTimer {
 public:
  CallTimer(std::string_view op, Device d, const Context& ctx);  // only while active()
  ~CallTimer();
  CallTimer(const CallTimer&) = delete;
  CallTimer& operator=(const CallTimer&) = delete;

 private:
  OpProfiler::State* state_;
  bool outermost_ = false;
  size_t record_ = 0;
};

}  // namespace kimi::profile
