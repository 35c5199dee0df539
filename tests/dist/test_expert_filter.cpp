// tests/dist/test_expert_filter.cpp: bind_weights with an ExpertFilter (kimi/model/checkpoint.h) never looks up a
// rejected routed expert's tensors (so a holders-only EP rank never reads their checkpoint pages) and binds the
// kept ones exactly as without a filter. The lookup records every name asked for, over a random model's tensors
// (the schema of k3-tiny with MXFP4 experts and of kimi-linear-tiny).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "kimi/model/model.h"
#include "kimi/model/schema.h"
#include "model/weights.h"

namespace kimi::model {
namespace {

void check_filter(const std::string& name, bool mxfp4) {
  const Config c = named_config(name);
  SchemaOptions opt;
  opt.mxfp4_experts = mxfp4;
  const std::vector<TensorSpec> schema = checkpoint_schema(c, opt);
  const Model m = Model::random(c, Device::cpu(), 3, opt);
  std::map<std::string, TensorView> view_of;
  for (size_t i = 0; i < schema.size(); ++i) view_of.emplace(schema[i].name, m.weights().created_views[i]);
  std::set<std::string> asked;
  auto lookup = [&](const std::string& n) {
    asked.insert(n);
    return view_of.at(n);
  };
  // Rank 1 of 3 under round-robin keeps experts 1, 4, 7, ...
  const ExpertFilter keep = [](int64_t, int64_t e) { return e % 3 == 1; };
  const ModelWeights w = bind_weights(c, opt, lookup, keep);
  for (const TensorSpec& s : schema) {
    const size_t at = s.name.find(".experts.");
    if (at == std::string::npos) {
      EXPECT_TRUE(asked.count(s.name)) << s.name << " (not a routed expert) was not bound";
      continue;
    }
    const int64_t e = std::stoll(s.name.substr(at + 9));
    EXPECT_EQ(asked.count(s.name) == 1, e % 3 == 1) << s.name;
  }
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    if (!c.is_moe_layer(i)) continue;
    const auto& ex = w.layers[size_t(i)].ffn.experts;
    const auto& all = m.weights().layers[size_t(i)].ffn.experts;
    ASSERT_EQ(int64_t(ex.size()), c.num_experts);
    for (size_t e = 0; e < ex.size(); ++e) {
      EXPECT_EQ(ex[e].gate.w.present(), e % 3 == 1) << "layer " << i << " expert " << e;
      if (e % 3 != 1) continue;
      EXPECT_EQ(ex[e].gate.w.data, all[e].gate.w.data);
      EXPECT_EQ(ex[e].down.scale.data, all[e].down.scale.data);
    }
  }
}

TEST(ExpertFilter, RejectedExpertsAreNeverLookedUp) {
  check_filter("k3-tiny", true);
  check_filter("kimi-linear-tiny", false);
}

}  // namespace
}  // namespace kimi::model
