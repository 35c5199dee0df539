// kimi/profile.h: per-operator timing of a model's forward, attributed to the cost model's layer kinds.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "expect_error.h"
#include "kimi/model/cache.h"
#include "kimi/model/config.h"
#include "kimi/model/model.h"
#include "kimi/ops/norm.h"
#include "kimi/profile.h"
#include "kimi/tensor.h"

namespace kimi {
namespace {

using model::Config;

// The calls per (scope, op) of one forward over `tokens` tokens in one sequence.
std::map<std::string, int64_t> calls_of(const std::vector<OpTiming>& r) {
  std::map<std::string, int64_t> m;
  for (const OpTiming& t : r) m[t.scope + "/" + t.op] += t.calls;
  return m;
}

TEST(Profile, ForwardAttributesEveryOperatorToItsLayerKind) {
  const Config c = model::named_config("kimi-linear-tiny");
  const model::Model m = model::Model::random(c, Device::cpu(), 3);
  model::Cache cache(m, 1, 64);
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 7};
  const std::vector<int64_t> cu = {0, 7}, slots = {0};
  OpProfiler prof;
  const Tensor logits = model::forward(m, cache, {tokens, cu, slots});
  const std::vector<OpTiming> r = prof.results();
  const std::map<std::string, int64_t> calls = calls_of(r);

  int64_t kda = 0, mla = 0, moe = 0, dense = 0;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    (c.is_kda_layer(i) ? kda : mla) += 1;
    (c.is_moe_layer(i) ? moe : dense) += 1;
  }
  ASSERT_GT(kda, 0);
  ASSERT_GT(mla, 0);
  ASSERT_GT(moe, 0);
  // One embedding gather; the head's row gather, final norm and lm_head; each layer's two pre-norms under the
  // layer kind of the block they feed; one kda_chunk_fwd (or recurrent) per KDA layer; one MoE call per MoE layer.
  EXPECT_EQ(calls.at("embed/gather_rows"), 1);
  EXPECT_EQ(calls.at("head/gather_rows"), 1);
  EXPECT_EQ(calls.at("head/rms_norm"), 1);
  EXPECT_EQ(calls.at("head/linear"), 1);
  EXPECT_EQ(calls.at("moe/latent_moe"), moe);
  EXPECT_GE(calls.at("kda/rms_norm"), kda);
  EXPECT_EQ(calls.at("mla/mla_prefill"), mla);
  EXPECT_EQ(calls.at("mla/mla_cache_write"), mla);
  const int64_t kda_core = (calls.count("kda/kda_chunk_fwd") ? calls.at("kda/kda_chunk_fwd") : 0) +
                           (calls.count("kda/kda_recurrent_fwd") ? calls.at("kda/kda_recurrent_fwd") : 0);
  EXPECT_EQ(kda_core, kda);
  for (const OpTiming& t : r) {
    EXPECT_FALSE(t.scope.empty()) << t.op << " ran outside every scope";
    EXPECT_EQ(t.device, Device::cpu());
    EXPECT_GE(t.ms, 0.0);
    EXPECT_GT(t.calls, 0);
  }
  // latent_moe runs linear, router and GLU inside: timed once, as itself (no "moe/linear" entry from inside it)
  EXPECT_EQ(calls.count("moe/linear"), 0u);

  // results() is repeatable; clear() drops the records; later calls are recorded afresh
  EXPECT_EQ(calls_of(prof.results()), calls);
  prof.clear();
  EXPECT_TRUE(prof.results().empty());
  Tensor x(DType::f32, {2, 8}), w(DType::f32, {8}), y(DType::f32, {2, 8});
  std::fill_n(x.data_as<float>(), 16, 1.f), std::fill_n(w.data_as<float>(), 8, 1.f);
  rms_norm(x.view(), w.view(), 1e-6f, y.view());
  const std::vector<OpTiming> one = prof.results();
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].scope, "");
  EXPECT_EQ(one[0].op, "rms_norm");
  EXPECT_EQ(one[0].calls, 1);
}

TEST(Profile, OneProfilerPerThreadAndScopesWithoutOneAreInert) {
  {
    const ProfileScope s("kda");  // no profiler: nothing recorded, nothing thrown
  }
  OpProfiler a;
  EXPECT_KIMI_ERROR(OpProfiler b;, "OpProfiler: expected at most one profiler per thread, got a second one");
  {
    const ProfileScope outer("moe");
    const ProfileScope inner("head");
    Tensor x(DType::f32, {1, 4}), w(DType::f32, {4}), y(DType::f32, {1, 4});
    std::fill_n(x.data_as<float>(), 4, 2.f), std::fill_n(w.data_as<float>(), 4, 1.f);
    rms_norm(x.view(), w.view(), 1e-6f, y.view());
  }
  const std::vector<OpTiming> r = a.results();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].scope, "head");  // the innermost scope names the call
}

}  // namespace
}  // namespace kimi
