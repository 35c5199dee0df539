// Model::random (kimi/model/model.h): a model without a checkpoint, its weights made on their devices by
// fill_random with the rule of kimi/model/random_weights.h.
//   - on the tiny named configs: forward gives finite, O(1) logits; the same seed gives the same weights and
//     logits, another seed other weights; every tensor of the schema is made, in the rule's range;
//   - placement: each tensor is made on the device of the block that reads it (nothing is copied but the tied
//     embedding), and blocks on a second host device give the all-CPU model's logits bit for bit;
//   - on a GPU (CUDA builds): the same weights, bit for bit, as on the CPU, logits within SPEC 14, and the
//     device's memory counters (kimi/device.h) see the weights.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "cuda_tests.h"
#include "expect_error.h"
#include "kimi/device.h"
#include "kimi/model/model.h"
#include "kimi/model/random_weights.h"
#include "model/weights.h"
#include "model_testutil.h"

namespace kimi::model {
namespace {

SchemaOptions options_for(const Config& c) {
  SchemaOptions so;
  so.mxfp4_experts = c.k3_wrapper;  // as `kimi random-model` writes K3 checkpoints
  return so;
}

std::vector<uint8_t> host_bytes(const TensorView& t) {
  Tensor h(t.dtype, std::span<const int64_t>(t.shape.data(), size_t(t.ndim)));
  copy(h, t);
  const uint8_t* p = static_cast<const uint8_t*>(h.data());
  return {p, p + h.nbytes()};
}

// Logits of every position of a 21-token prompt and of two decode steps.
std::vector<float> some_logits(const Model& m) {
  const std::vector<int32_t> tokens = testutil::random_tokens(23, 4, m.config().vocab_size);
  return testutil::logits_in_pieces(m, tokens, {21, 1, 1});
}

class RandomModel : public ::testing::TestWithParam<std::string> {};

TEST_P(RandomModel, RunsForwardWithFiniteLogitsOfOrderOne) {
  const Config c = named_config(GetParam());
  const Model m = Model::random(c, Device::cpu(), 7, options_for(c));
  EXPECT_EQ(m.files(), nullptr);  // no checkpoint behind it
  EXPECT_EQ(m.config().num_hidden_layers, c.num_hidden_layers);
  EXPECT_EQ(m.device_weight_bytes(), 0u);  // all on the host
  const std::vector<float> l = some_logits(m);
  ASSERT_EQ(int64_t(l.size()), 23 * c.vocab_size);
  double sq = 0;
  for (float v : l) {
    ASSERT_TRUE(std::isfinite(v));
    sq += double(v) * v;
  }
  const double rms = std::sqrt(sq / double(l.size()));
  EXPECT_GT(rms, 0.05);  // not degenerate
  EXPECT_LT(rms, 20.0);  // not blown up: the rule keeps activations O(1)
}

TEST_P(RandomModel, MakesEverySchemaTensorInTheRulesRange) {
  const Config c = named_config(GetParam());
  const SchemaOptions so = options_for(c);
  const Model m = Model::random(c, Device::cpu(), 3, so);
  const std::vector<TensorSpec> schema = checkpoint_schema(c, so);
  const std::vector<TensorView>& made = m.weights().created_views;
  ASSERT_EQ(made.size(), schema.size());
  for (size_t i = 0; i < schema.size(); ++i) {
    const RandomInit r = random_init(schema[i], c);
    const TensorView t = made[i];
    ASSERT_EQ(t.dtype, r.dtype) << schema[i].name;
    ASSERT_EQ(std::vector<int64_t>(t.shape.begin(), t.shape.begin() + t.ndim), schema[i].shape) << schema[i].name;
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t k = 0; k < r.count; ++k) {
      const double v = load_as_f32(t.data, t.dtype, k);
      lo = std::min(lo, v), hi = std::max(hi, v);
    }
    const double slack = r.dtype == DType::bf16 ? 0.004 * std::max(1.0, std::abs(r.max())) : 0.0;  // bf16 rounding
    EXPECT_GE(lo, r.min() - slack) << schema[i].name;
    EXPECT_LE(hi, r.max() + slack) << schema[i].name;
    if (r.count >= 64) {
      EXPECT_GT(hi - lo, 0.5 * (r.max() - r.min())) << schema[i].name << ": values spread";
    }
    for (int64_t k = r.count; k < t.numel(); ++k) ASSERT_EQ(load_as_f32(t.data, t.dtype, k), 0.f) << schema[i].name;
  }
}

TEST_P(RandomModel, SameSeedSameWeightsOtherSeedOthers) {
  const Config c = named_config(GetParam());
  const Model a = Model::random(c, Device::cpu(), 5, options_for(c)), b = Model::random(c, Device::cpu(), 5, options_for(c)),
              other = Model::random(c, Device::cpu(), 6, options_for(c));
  const std::vector<TensorView>& ta = a.weights().created_views;
  size_t differ = 0;
  for (size_t i = 0; i < ta.size(); ++i) {
    EXPECT_EQ(host_bytes(ta[i]), host_bytes(b.weights().created_views[i])) << i;
    differ += host_bytes(ta[i]) != host_bytes(other.weights().created_views[i]);
  }
  EXPECT_EQ(differ, ta.size());  // every tensor has its own values per seed (all have > 1 random value)
  EXPECT_EQ(some_logits(a), some_logits(b));
  EXPECT_NE(some_logits(a), some_logits(other));
}

// A MoE layer's routed experts are slices of one allocation per projection and part, expert e at base + e * stride
// (the layout place_weights gives a checkpoint's experts on a GPU: the CUDA MoE kernels' stacked form).
TEST_P(RandomModel, RoutedExpertsAreStacked) {
  const Config c = named_config(GetParam());
  const Model m = Model::random(c, Device::cpu(), 4, options_for(c));
  size_t layers = 0;
  for (const LayerWeights& L : m.weights().layers) {
    if (!L.ffn.moe) continue;
    ++layers;
    const std::vector<MlpWeights>& ex = L.ffn.experts;
    ASSERT_EQ(int64_t(ex.size()), c.num_experts);
    for (Weight MlpWeights::*p : {&MlpWeights::gate, &MlpWeights::up, &MlpWeights::down})
      for (TensorView Weight::*part : {&Weight::w, &Weight::scale}) {
        const TensorView& first = (ex[0].*p).*part;
        if (!first.present()) continue;
        const size_t bytes = size_t(first.numel()) * first.element_size();
        for (size_t e = 0; e < ex.size(); ++e)
          ASSERT_EQ(((ex[e].*p).*part).data, static_cast<const char*>(first.data) + e * bytes) << "expert " << e;
      }
  }
  EXPECT_GT(layers, 0u);
}

TEST_P(RandomModel, TensorsAreMadeOnTheirBlocksDevice) {
  const Config c = named_config(GetParam());
  const Device other{DeviceType::cpu, 1};
  const Model ref = Model::random(c, Device::cpu(), 9, options_for(c));
  for (int phase = 0; phase < 2; ++phase) {
    const Placement p = place_blocks(c, other, [&](BlockKind, int64_t layer, size_t ordinal) {
      return (ordinal + size_t(layer + 1)) % 2 == size_t(phase) ? other : Device::cpu();
    });
    const Model m = Model::random(c, p, 9, options_for(c));
    const std::vector<TensorSpec> schema = checkpoint_schema(c, options_for(c));
    size_t on_other = 0;
    for (size_t i = 0; i < schema.size(); ++i) {
      EXPECT_EQ(m.weights().created_views[i].device, home_device(schema[i], c, p)) << schema[i].name;
      on_other += m.weights().created_views[i].device == other;
    }
    EXPECT_GT(on_other, 0u);
    // nothing is copied, except the tied embedding when the head runs elsewhere than the embedding
    const bool tied_copy = c.tie_word_embeddings && p.embedding != p.head;
    EXPECT_EQ(m.weights().device_copies.size(), tied_copy ? 1u : 0u) << p.summary();
    EXPECT_EQ(some_logits(m), some_logits(ref)) << "phase " << phase << " [" << p.summary() << "]";
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, RandomModel, ::testing::Values("k3-tiny", "kimi-linear-tiny"));

TEST(RandomModel, RefusesMxfp4WidthsMemoryAndMissingDevices) {
  Config c = named_config("kimi-linear-tiny");
  c.moe_intermediate_size = 48;  // not a multiple of 32
  SchemaOptions so;
  so.mxfp4_experts = true;
  EXPECT_KIMI_ERROR(Model::random(c, Device::cpu(), 1, so), "checkpoint_schema", "divisible by 32",
                    "moe_intermediate_size 48");
  // weights larger than the memory: refused before anything is allocated
  Config huge = named_config("k3-tiny");
  huge.vocab_size = int64_t(1) << 40;  // an embedding of 2^40 x 256 bf16: 512 TiB
  const size_t held = device_memory_stats(Device::cpu()).tensor_bytes;
  EXPECT_KIMI_ERROR(Model::random(huge, Device::cpu(), 1, options_for(huge)), "Model::random: argument 'device'",
                    "expected room for the weights: ", "on cpu, got ", "available");
  EXPECT_EQ(device_memory_stats(Device::cpu()).tensor_bytes, held);
#ifndef KIMI_WITH_CUDA
  EXPECT_KIMI_ERROR(Model::random(named_config("k3-tiny"), Device::cuda(0), 1), "Model", "'device'",
                    "this build has no CUDA backend", "got cuda:0");
#endif
}

#ifdef KIMI_WITH_CUDA
TEST(RandomModel, OnTheGpuTheSameWeightsAsOnTheCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  for (const char* name : {"k3-tiny", "kimi-linear-tiny"}) {
    const Config c = named_config(name);
    const Model cpu = Model::random(c, Device::cpu(), 12, options_for(c));
    reset_peak_memory(Device::cuda(0));
    const size_t before = device_memory_stats(Device::cuda(0)).tensor_bytes;
    Model gpu = Model::random(c, Device::cuda(0), 12, options_for(c));
    gpu.set_activation_dtype(DType::f32);  // the fp32 model on both devices (a GPU model defaults to bf16 activations)
    EXPECT_GE(device_memory_stats(Device::cuda(0)).tensor_bytes - before, gpu.device_weight_bytes());
    EXPECT_GT(gpu.device_weight_bytes(), 0u);
    const std::vector<TensorView>& a = cpu.weights().created_views;
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_EQ(host_bytes(a[i]), host_bytes(gpu.weights().created_views[i])) << name << " " << i;
    const std::vector<float> lc = some_logits(cpu), lg = some_logits(gpu);
    EXPECT_LE(testutil::rel_err(lg, lc), 1e-4) << name;  // SPEC 14: whole-model logits in fp32
    EXPECT_GT(device_memory_stats(Device::cuda(0)).peak_bytes(), gpu.device_weight_bytes());
  }
}
#endif

}  // namespace
}  // namespace kimi::model
