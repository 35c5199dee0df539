// Implementation of src/cuda/mla/decode_options.h (host code, built in every build).
#include "cuda/mla/decode_options.h"

namespace kimi::cuda {

namespace {
thread_local const ScopedMlaDecodePath* t_scoped = nullptr;  // the innermost ScopedMlaDecodePath of this thread
}  // namespace

ScopedMlaDecodePath::ScopedMlaDecodePath(MlaDecodePath path, MlaDecodeRecord* record, MlaDecodeStages stages)
    : path_(path), record_(record), stages_(stages), outer_(t_scoped) {
  t_scoped = this;
}

ScopedMlaDecodePath::~ScopedMlaDecodePath() { t_scoped = outer_; }

MlaDecodePath mla_decode_path() { return t_scoped ? t_scoped->path_ : MlaDecodePath::automatic; }
MlaDecodeRecord* mla_decode_record() { return t_scoped ? t_scoped->record_ : nullptr; }
MlaDecodeStages mla_decode_stages() { return t_scoped ? t_scoped->stages_ : MlaDecodeStages::all; }

}  // namespace kimi::cuda
