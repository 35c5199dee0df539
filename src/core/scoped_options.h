// src/core/scoped_options.h: a thread-local override stack of launch options, one per options type T (the CUDA
// launchers' KdaLaunchOptions, ExpertPathOptions, MlaLaunchOptions, MlaDecodeOptions). Tests and benchmarks force a
// kernel family, or ask for a record of what ran, for the calls that reach a launcher through the kimi:: operators
// (which take no options argument); product code constructs none, so every launcher sees T's defaults.
//
// The stack: each ScopedOptions<T> copies its options and links to the object that was innermost on its thread when
// it was made; current() reads the innermost object's options, else T{}. Invariants:
//   - per thread and per T: other threads, and other option types, never see an object (no process-wide state);
//   - objects are destroyed in the reverse order of their construction on the thread that made them (automatic or
//     std::optional storage in one scope, never moved: copy and move are deleted), so the destructor restores the
//     outer object exactly;
//   - a reference from current() stays valid while the object it names lives (callers read it within the call).
#pragma once

namespace kimi {

template <class T>
class ScopedOptions {
 public:
  explicit ScopedOptions(const T& options) : options_(options), outer_(t_innermost) { t_innermost = &options_; }
  ~ScopedOptions() { t_innermost = outer_; }
  ScopedOptions(const ScopedOptions&) = delete;
  ScopedOptions& operator=(const ScopedOptions&) = delete;

  // This thread's innermost object's options, else the defaults T{}.
  static const T& current() { return t_innermost ? *t_innermost : kDefaults; }

 private:
  T options_;
  const T* outer_;  // the object innermost before this one on this thread, or null
  static inline thread_local const T* t_innermost = nullptr;
  static inline const T kDefaults{};
};

}  // namespace kimi
