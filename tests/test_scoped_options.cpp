// The thread-local override stack of launch options (src/core/scoped_options.h) through the CUDA launchers' public
// names (host code, runs in every build): the defaults without an object, the innermost object wins and the
// destructor restores the outer one, other threads and other option types keep their defaults, and
// kda_launch_options prefers options given to the call.
#include <gtest/gtest.h>

#include <optional>
#include <thread>

#include "cuda/kda/options.h"
#include "cuda/mla/decode_options.h"
#include "cuda/mla/options.h"
#include "cuda/moe/options.h"

namespace kimi::cuda {
namespace {

TEST(ScopedOptions, DefaultsWithoutAnObject) {
  EXPECT_EQ(expert_path_options().decode, DecodeExpertPath::automatic);
  EXPECT_EQ(expert_path_options().touched_max_tokens, 8);
  EXPECT_EQ(expert_path_options().record, nullptr);
  EXPECT_EQ(kda_launch_options(nullptr).segment_chunks, 0);
  EXPECT_EQ(mla_launch_options().prefill, MlaPrefillPath::automatic);
  EXPECT_EQ(mla_decode_path(), MlaDecodePath::automatic);
  EXPECT_EQ(mla_decode_record(), nullptr);
  EXPECT_EQ(mla_decode_stages(), MlaDecodeStages::all);
}

TEST(ScopedOptions, InnermostWinsAndDestructorRestoresTheOuter) {
  ExpertPathRecord rec;
  {
    const ScopedExpertPathOptions outer(ExpertPathOptions{.touched_max_tokens = 16, .record = &rec});
    EXPECT_EQ(expert_path_options().touched_max_tokens, 16);
    EXPECT_EQ(expert_path_options().record, &rec);
    {
      const ScopedExpertPathOptions inner(ExpertPathOptions{.decode = DecodeExpertPath::grouped});
      EXPECT_EQ(expert_path_options().decode, DecodeExpertPath::grouped);
      EXPECT_EQ(expert_path_options().touched_max_tokens, 8);  // inner's own copy: T{}'s fields where not set
      EXPECT_EQ(expert_path_options().record, nullptr);
    }
    EXPECT_EQ(expert_path_options().decode, DecodeExpertPath::automatic);
    EXPECT_EQ(expert_path_options().touched_max_tokens, 16);
    EXPECT_EQ(expert_path_options().record, &rec);
  }
  EXPECT_EQ(expert_path_options().touched_max_tokens, 8);
  EXPECT_EQ(expert_path_options().record, nullptr);
}

TEST(ScopedOptions, OptionalStorageAndGivenOptions) {
  std::optional<ScopedKdaLaunchOptions> scope;
  scope.emplace(KdaLaunchOptions{.segment_chunks = 3});
  EXPECT_EQ(kda_launch_options(nullptr).segment_chunks, 3);
  const KdaLaunchOptions given{.segment_chunks = -1};
  EXPECT_EQ(&kda_launch_options(&given), &given);  // the call's own options win over the scope
  scope.reset();
  EXPECT_EQ(kda_launch_options(nullptr).segment_chunks, 0);
}

TEST(ScopedOptions, OtherThreadsAndOtherTypesKeepTheDefaults) {
  MlaDecodeRecord rec;
  const ScopedMlaDecodePath path(MlaDecodePath::ffma, &rec, MlaDecodeStages::absorb);
  const ScopedMlaLaunchOptions mla(MlaLaunchOptions{.prefill = MlaPrefillPath::blocks});
  EXPECT_EQ(mla_decode_path(), MlaDecodePath::ffma);
  EXPECT_EQ(mla_decode_record(), &rec);
  EXPECT_EQ(mla_decode_stages(), MlaDecodeStages::absorb);
  EXPECT_EQ(mla_launch_options().prefill, MlaPrefillPath::blocks);
  EXPECT_EQ(expert_path_options().decode, DecodeExpertPath::automatic);
  EXPECT_EQ(kda_launch_options(nullptr).segment_chunks, 0);

  MlaDecodePath seen_path = MlaDecodePath::ffma;
  MlaDecodeRecord* seen_record = &rec;
  MlaPrefillPath seen_prefill = MlaPrefillPath::blocks;
  std::thread other([&] {
    seen_path = mla_decode_path();
    seen_record = mla_decode_record();
    seen_prefill = mla_launch_options().prefill;
  });
  other.join();
  EXPECT_EQ(seen_path, MlaDecodePath::automatic);
  EXPECT_EQ(seen_record, nullptr);
  EXPECT_EQ(seen_prefill, MlaPrefillPath::automatic);
}

}  // namespace
}  // namespace kimi::cuda
