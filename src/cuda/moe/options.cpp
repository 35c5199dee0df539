// Implementation of src/cuda/moe/options.h (host code, built in every build).
#include "cuda/moe/options.h"

namespace kimi::cuda {

namespace {
thread_local const ExpertPathOptions* t_scoped = nullptr;  // the innermost ScopedExpertPathOptions of this thread
const ExpertPathOptions kDefaults{};
}  // namespace

ScopedExpertPathOptions::ScopedExpertPathOptions(const ExpertPathOptions& options)
    : options_(options), outer_(t_scoped) {
  t_scoped = &options_;
}

ScopedExpertPathOptions::~ScopedExpertPathOptions() { t_scoped = outer_; }

const ExpertPathOptions& expert_path_options() { return t_scoped ? *t_scoped : kDefaults; }

}  // namespace kimi::cuda
