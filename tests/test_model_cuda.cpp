// The model on a CUDA device (kimi/model/model.h with Device::cuda(0)), against the same model on the CPU, on
// k3-tiny and kimi-linear-tiny. Registered in a build with the CUDA backend only (tests/cuda_tests.h), skipped there
// when no CUDA device is visible; AMissingDeviceIsRefused runs in every build.
//
// Every test runs under several placements, because whatever the plan is the answers must not change:
//   gpu_max      the real predicate (kimi::op_supported): every block whose kernels exist runs on the GPU;
//   no_mla       ... but the MLA mixers on the CPU (KDA and MLA layers alternate devices);
//   no_moe       ... but the MoE FFNs on the CPU (mixer on the GPU, FFN on the CPU in one layer);
//   no_attn_res  ... but the AttnRes mixes on the CPU (the sealed blocks live on both devices);
//   no_linear    ... but every block calling linear on the CPU (only the embedding, the FFNs whose kernels
//                exist and the mixes on the GPU).
// With today's CUDA operators gpu_max runs every block of both models on the GPU; the others mix devices.
// Checked: logits vs the CPU model (SPEC 14: whole-model logits in fp32 within 1e-4 relative), greedy tokens
// identical, prefill(T) == prefill(T - n) + n decode steps == chunked prefill on the GPU, a varlen batch in
// scattered slots == each sequence alone, caches built for another placement refused, weights uploaded once,
// the fallback notes printed once. The parity fixtures run through the CUDA model in test_parity.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "expect_error.h"
#include "kimi/device.h"
#include "kimi/log.h"
#include "kimi/model/generate.h"
#include "kimi/model/model.h"
#include "kimi/model/schema.h"
#include "model_testutil.h"
#include "tensor_testutil.h"

namespace kimi::model {
namespace {

#ifdef KIMI_WITH_CUDA
using testutil::logits_in_pieces;
using testutil::random_tokens;
using testutil::rel_err;

constexpr double kVsCpu = 1e-4;        // SPEC 14: whole-model logits on a tiny config in fp32
constexpr double kSelfConsistent = 2e-5;  // test_model.cpp's bound: the same backend's prefill / decode forms

#define REQUIRE_CUDA()                                                                                  \
  if (cuda_device_count() == 0)                                                                         \
  GTEST_SKIP() << "no CUDA device visible"

OpSupported without(std::vector<std::string_view> missing) {
  return [missing](std::string_view op, Device d) {
    return op_supported(op, d) && std::find(missing.begin(), missing.end(), op) == missing.end();
  };
}

struct Variant {
  const char* name;
  std::vector<std::string_view> missing;
};
const Variant kVariants[] = {{"gpu_max", {}},
                             {"no_mla", {"mla_prefill"}},
                             {"no_moe", {"latent_moe"}},
                             {"no_attn_res", {"attn_res"}},
                             {"no_linear", {"linear"}}};

const Model& cpu_model(const std::string& config) {
  static std::map<std::string, std::unique_ptr<Model>> m;
  auto& p = m[config];
  if (!p) p = std::make_unique<Model>(testutil::tiny_dir(config));
  return *p;
}

const Model& gpu_model(const std::string& config, const Variant& v) {
  static std::map<std::string, std::unique_ptr<Model>> m;
  auto& p = m[config + "/" + v.name];
  if (!p) {
    const NoteHandler old = set_note_handler([](std::string_view) {});  // NotesOnce checks them
    p = std::make_unique<Model>(testutil::tiny_dir(config), Device::cuda(0), without(v.missing));
    p->set_activation_dtype(DType::f32);  // compared with the CPU model within SPEC 14's fp32 bound
    set_note_handler(old);
  }
  return *p;
}

struct Param {
  std::string config;
  Variant variant;
};
void PrintTo(const Param& p, std::ostream* os) { *os << p.config << " " << p.variant.name; }

class ModelCuda : public ::testing::TestWithParam<Param> {
 protected:
  const Model& cpu() const { return cpu_model(GetParam().config); }
  const Model& gpu() const { return gpu_model(GetParam().config, GetParam().variant); }
  std::string where() const { return GetParam().config + " " + GetParam().variant.name + " [" + gpu().placement().summary() + "]"; }
};

TEST_P(ModelCuda, LogitsMatchTheCpuModel) {
  REQUIRE_CUDA();
  const int64_t V = cpu().config().vocab_size;
  // 70 tokens cross the 64-token KDA chunk; then 4 decode steps
  const std::vector<int32_t> tokens = random_tokens(74, 3, V);
  const std::vector<int64_t> pieces = {70, 1, 1, 1, 1};
  const std::vector<float> want = logits_in_pieces(cpu(), tokens, pieces), got = logits_in_pieces(gpu(), tokens, pieces);
  ASSERT_EQ(got.size(), want.size());
  for (float v : got) ASSERT_TRUE(std::isfinite(v)) << where();
  for (size_t t = 0; t < tokens.size(); ++t) {
    const std::span<const float> g(got.data() + t * size_t(V), size_t(V)), w(want.data() + t * size_t(V), size_t(V));
    EXPECT_LE(rel_err(g, w), kVsCpu) << where() << " position " << t;
  }
}

TEST_P(ModelCuda, PerLayerHiddenStatesMatchTheCpuModel) {
  REQUIRE_CUDA();
  const std::vector<int32_t> tokens = random_tokens(19, 4, cpu().config().vocab_size);
  auto trace = [&](const Model& m) {
    std::vector<std::vector<float>> h;
    Cache cache(m, 1, 19);
    ForwardOptions opt;
    opt.on_layer = [&](int64_t, TensorView x) {
      EXPECT_EQ(x.device, Device::cpu()) << "on_layer gets host views";
      h.emplace_back(static_cast<const float*>(x.data), static_cast<const float*>(x.data) + x.numel());
    };
    const int64_t cu[2] = {0, 19}, slot[1] = {0};
    forward(m, cache, {tokens, cu, slot}, opt);
    return h;
  };
  const auto want = trace(cpu()), got = trace(gpu());
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_LE(rel_err(got[i], want[i]), kVsCpu) << where() << " layer " << int64_t(i) - 1;
}

TEST_P(ModelCuda, GreedyGenerationIsIdentical) {
  REQUIRE_CUDA();
  const int64_t V = cpu().config().vocab_size;
  const std::vector<std::vector<int32_t>> prompts = {{1, 2, 3}, {4}, random_tokens(67, 9, V)};
  GenerateOptions g;
  g.max_new_tokens = 8;
  const GenerateResult a = generate(cpu(), prompts, g), b = generate(gpu(), prompts, g);
  EXPECT_EQ(b.tokens, a.tokens) << where();
  EXPECT_EQ(b.decode_tokens, a.decode_tokens);
}

// Seeded sampling runs sample_tokens on the GPU head (the logits stay there) with the CPU's draws (seed, prompt,
// step): the tokens are the CPU generation's, as far as the two models' logits agree (the draw falls within their
// ~1e-6 relative difference of a CDF boundary with a probability of that order).
TEST_P(ModelCuda, SeededSamplingMatchesTheCpu) {
  REQUIRE_CUDA();
  const int64_t V = cpu().config().vocab_size;
  const std::vector<std::vector<int32_t>> prompts = {{1, 2, 3}, {4}, random_tokens(67, 9, V)};
  GenerateOptions g;
  g.max_new_tokens = 8;
  g.sampling = {0.8f, 40, 0.9f, 1234};
  const GenerateResult a = generate(cpu(), prompts, g), b = generate(gpu(), prompts, g);
  EXPECT_EQ(b.tokens, a.tokens) << where();
  EXPECT_EQ(generate(gpu(), prompts, g).tokens, b.tokens) << where() << " (reproducible)";
}

// forward_into a view on the head's device: the head writes the rows there; they are forward()'s host logits.
TEST_P(ModelCuda, ForwardIntoTheHeadsDeviceGivesTheHostLogits) {
  REQUIRE_CUDA();
  const Model& m = gpu();
  const std::vector<int32_t> tokens = random_tokens(21, 5, m.config().vocab_size);
  const int64_t cu[3] = {0, 12, 21}, slots[2] = {1, 0};
  Cache a(m, 2, 32), b(m, 2, 32);
  const Tensor want = forward(m, a, {tokens, cu, slots});
  const Tensor dev = Tensor::uninitialized(DType::f32, {2, m.config().vocab_size}, m.placement().head);
  forward_into(m, b, {tokens, cu, slots}, dev);
  const Tensor got = kimi::testutil::copy_to(dev, Device::cpu());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.nbytes()), 0) << where();
  EXPECT_EQ(b.length(1), 12);
}

TEST_P(ModelCuda, PrefillThenDecodeMatchesOnePrefillOnTheGpu) {
  REQUIRE_CUDA();
  const std::vector<int32_t> tokens = random_tokens(70, 3, gpu().config().vocab_size);
  const std::vector<float> whole = logits_in_pieces(gpu(), tokens, {70});
  for (const std::vector<int64_t>& pieces : std::vector<std::vector<int64_t>>{{66, 1, 1, 1, 1}, {1, 1, 1, 67}, {13, 40, 17}}) {
    const std::vector<float> split = logits_in_pieces(gpu(), tokens, pieces);
    ASSERT_EQ(split.size(), whole.size());
    EXPECT_LE(rel_err(split, whole), kSelfConsistent) << where() << " pieces of " << pieces[0] << ", " << pieces[1] << ", ...";
  }
}

TEST_P(ModelCuda, VarlenBatchInScatteredSlotsMatchesEachSequenceAlone) {
  REQUIRE_CUDA();
  const Model& m = gpu();
  const int64_t V = m.config().vocab_size;
  const std::vector<std::vector<int32_t>> seqs = {random_tokens(9, 5, V), random_tokens(1, 6, V), random_tokens(70, 7, V)};
  std::vector<int32_t> packed;
  std::vector<int64_t> cu{0};
  for (const auto& s : seqs) packed.insert(packed.end(), s.begin(), s.end()), cu.push_back(int64_t(packed.size()));
  const int64_t slots[3] = {3, 0, 1};
  Cache cache(m, 4, 80), cpu_cache(cpu(), 4, 80);
  const Tensor batch = forward(m, cache, {packed, cu, slots});
  const Tensor cpu_batch = forward(cpu(), cpu_cache, {packed, cu, slots});
  EXPECT_EQ(batch.device(), Device::cpu()) << "forward returns host logits";
  const int32_t next[3] = {5, 6, 7};
  const int64_t cu1[4] = {0, 1, 2, 3}, slots1[3] = {1, 3, 0};  // a decode step in another order
  const Tensor step = forward(m, cache, {next, cu1, slots1});
  const Tensor cpu_step = forward(cpu(), cpu_cache, {next, cu1, slots1});
  EXPECT_EQ(cache.length(3), 10);
  EXPECT_EQ(cache.length(2), 0);
  auto row = [V](const Tensor& t, int64_t r) { return std::span<const float>(t.data_as<float>() + r * V, size_t(V)); };
  const int64_t order[3] = {2, 0, 1};  // step row r is sequence order[r]
  for (int64_t n = 0; n < 3; ++n) {
    std::vector<int32_t> alone = seqs[size_t(n)];
    const std::vector<float> ref = logits_in_pieces(m, alone, {int64_t(alone.size())});
    EXPECT_LE(rel_err(row(batch, n), std::span(ref).last(size_t(V))), 1e-5) << where() << " sequence " << n;
    EXPECT_LE(rel_err(row(batch, n), row(cpu_batch, n)), kVsCpu) << where() << " sequence " << n << " vs the CPU";
    alone.push_back(next[n == 0 ? 1 : n == 1 ? 2 : 0]);
    const std::vector<float> ref2 = logits_in_pieces(m, alone, {int64_t(alone.size())});
    int64_t r = 0;
    while (order[r] != n) ++r;
    EXPECT_LE(rel_err(row(step, r), std::span(ref2).last(size_t(V))), kSelfConsistent) << where() << " sequence " << n << " decode";
    EXPECT_LE(rel_err(row(step, r), row(cpu_step, r)), kVsCpu) << where() << " sequence " << n << " decode vs the CPU";
  }
}

TEST_P(ModelCuda, ACacheForAnotherPlacementIsRefused) {
  REQUIRE_CUDA();
  const Model& m = gpu();
  const Config& c = m.config();
  // every pool on the device its mixer does NOT run on
  std::vector<Device> wrong;
  for (const Placement::Layer& L : m.placement().layers) wrong.push_back(L.mixer == Device::cpu() ? Device::cuda(0) : Device::cpu());
  Cache cache(c, 1, 8, wrong);
  const int32_t tok[2] = {1, 2};
  const int64_t cu[2] = {0, 2}, slot[1] = {0};
  const std::string want = "layer 0's pools on " + to_string(m.placement().layers[0].mixer), got = "got " + to_string(wrong[0]);
  EXPECT_KIMI_ERROR(forward(m, cache, {tok, cu, slot}), "forward", "'cache'", want.c_str(), "Cache(model, ...)", got.c_str());
  EXPECT_EQ(cache.length(0), 0);
  Cache right(m, 1, 8);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) EXPECT_EQ(right.device(i), m.placement().layers[size_t(i)].mixer);
  EXPECT_NO_THROW(forward(m, right, {tok, cu, slot}));
}

TEST_P(ModelCuda, WeightsAreUploadedOnceAndOnlyForGpuBlocks) {
  REQUIRE_CUDA();
  const Model& m = gpu();
  size_t total = 0;
  for (const std::string& n : m.files()->checkpoint.names()) total += m.files()->checkpoint.info(n).nbytes;
  const size_t up = m.device_weight_bytes();
  EXPECT_LE(up, total) << where() << ": a tensor uploaded twice?";
  if (m.placement().embedding.type == DeviceType::cuda) {
    const TensorView embed = m.files()->checkpoint.get(tensor_prefix(m.config()) + "embed_tokens.weight");
    EXPECT_GE(up, size_t(embed.numel()) * embed.element_size()) << where();
  }
  bool any_gpu = false;
  for (const Placement::Block& b : m.placement().blocks) any_gpu = any_gpu || b.device.type == DeviceType::cuda;
  EXPECT_EQ(up > 0, any_gpu);
}

std::vector<Param> params() {
  std::vector<Param> p;
  for (const char* c : {"k3-tiny", "kimi-linear-tiny"})
    for (const Variant& v : kVariants) p.push_back({c, v});
  return p;
}

INSTANTIATE_TEST_SUITE_P(Tiny, ModelCuda, ::testing::ValuesIn(params()), [](const auto& info) {
  return std::string(info.param.config == "k3-tiny" ? "K3_" : "KimiLinear_") + info.param.variant.name;
});

TEST(ModelCudaDevice, NotesArePrintedOnceAndNameTheMissingKernels) {
  REQUIRE_CUDA();
  std::vector<std::string> got;
  const NoteHandler old = set_note_handler([&](std::string_view n) { got.emplace_back(n); });
  const Model m(testutil::tiny_dir("kimi-linear-tiny"), Device::cuda(0), without({"mla_decode"}));
  set_note_handler(old);
  EXPECT_EQ(got, m.placement().notes);
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(std::count_if(got.begin(), got.end(), [](const std::string& n) { return n.find("MLA mixers") != std::string::npos; }), 1);
  // generating does not repeat them
  std::vector<std::string> later;
  set_note_handler([&](std::string_view n) { later.emplace_back(n); });
  generate(m, std::vector<std::vector<int32_t>>{{1, 2}}, {});
  set_note_handler(old);
  EXPECT_TRUE(later.empty());
}
#endif  // KIMI_WITH_CUDA

TEST(ModelCudaDevice, AMissingDeviceIsRefused) {
  if (!cuda_built()) {
    EXPECT_KIMI_ERROR(Model(testutil::tiny_dir("k3-tiny"), Device::cuda(0)), "Model", "'device'", "no CUDA backend", "cuda:0");
    return;
  }
  const int n = cuda_device_count();
  const std::string visible = std::to_string(n) + " visible", dev = "cuda:" + std::to_string(n);
  EXPECT_KIMI_ERROR(Model(testutil::tiny_dir("k3-tiny"), Device::cuda(n)), "Model", "'device'", visible.c_str(), dev.c_str());
}

}  // namespace
}  // namespace kimi::model
