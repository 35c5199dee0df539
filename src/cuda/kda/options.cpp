// Implementation of src/cuda/kda/options.h (host code, built in every build: the conformance cases set options
// without knowing whether the CUDA backend is linked).
#include "cuda/kda/options.h"

namespace kimi::cuda {

namespace {
thread_local const KdaLaunchOptions* t_scoped = nullptr;  // the innermost ScopedKdaLaunchOptions of this thread
const KdaLaunchOptions kDefaults{};
}  // namespace

ScopedKdaLaunchOptions::ScopedKdaLaunchOptions(const KdaLaunchOptions& options)
    : options_(options), outer_(t_scoped) {
  t_scoped = &options_;
}

ScopedKdaLaunchOptions::~ScopedKdaLaunchOptions() { t_scoped = outer_; }

const KdaLaunchOptions& kda_launch_options(const KdaLaunchOptions* given) {
  return given ? *given : t_scoped ? *t_scoped : kDefaults;
}

}  // namespace kimi::cuda
