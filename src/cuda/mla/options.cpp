// Implementation of src/cuda/mla/options.h (host code, built in every build).
#include "cuda/mla/options.h"

namespace kimi::cuda {

namespace {
thread_local const MlaLaunchOptions* t_scoped = nullptr;  // the innermost ScopedMlaLaunchOptions of this thread
const MlaLaunchOptions kDefaults{};
}  // namespace

ScopedMlaLaunchOptions::ScopedMlaLaunchOptions(const MlaLaunchOptions& options) : options_(options), outer_(t_scoped) {
  t_scoped = &options_;
}

ScopedMlaLaunchOptions::~ScopedMlaLaunchOptions() { t_scoped = outer_; }

const MlaLaunchOptions& mla_launch_options() { return t_scoped ? *t_scoped : kDefaults; }

}  // namespace kimi::cuda
