// Decode steps replayed from CUDA graphs (src/model/decode_graph.h, docs/model/runtime.md "Decode steps from CUDA
// graphs"), on kimi-linear-tiny and k3-tiny.
//
// Every GPU test runs the same steps on two models loaded from one checkpoint: `graphs` (the default: decode steps
// captured and replayed) and `eager` (Model::set_decode_graphs(false): the same device work launched eagerly) and
// requires them to agree BIT FOR BIT: every step's logits and, after the steps, every byte of every cache pool.
// Each test also asserts from decode_graph_status() that the graph model really replayed (a capture refused by an
// operator fails the test with the operator's reason), so a silent eager fallback cannot pass.
// Checked: batch 1 and a varlen batch of slots holding different lengths; a replay after one slot is reset and
// prefilled again; a new batch size captures a new graph (and the old one still replays); prefill steps stay eager
// and equal; a re-plan, a new cache and a new activation dtype drop the graphs; bad input is refused before any
// write with nothing in the cache changed; on_layer and multi-device placements run eagerly. The CPU tests check
// the status of a CPU model and the setting. GPU tests are registered in CUDA builds only (tests/cuda_tests.h).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "expect_error.h"
#include "kimi/device.h"
#include "kimi/log.h"
#include "kimi/model/model.h"
#include "model_testutil.h"

namespace kimi::model {
namespace {

using testutil::random_tokens;

TEST(DecodeGraphCpu, ACpuModelReportsWhyDecodeIsEager) {
  const Model m(testutil::tiny_dir("kimi-linear-tiny"));
  const DecodeGraphStatus st = m.decode_graph_status();
  EXPECT_FALSE(st.supported);
  EXPECT_EQ(st.summary, "off: the model runs on cpu (CUDA graphs are for models on one GPU)");
  EXPECT_EQ(st.replays, 0);
  EXPECT_EQ(st.captures, 0);
}

TEST(DecodeGraphCpu, DecodeStepsOnTheCpuCountAsEagerAndTheSettingIsKept) {
  Model m(testutil::tiny_dir("kimi-linear-tiny"));
  EXPECT_TRUE(m.decode_graph_status().enabled);
  Cache cache(m, 2, 16);
  const int32_t prompt[3] = {1, 2, 3}, next[1] = {4};
  const int64_t cu[2] = {0, 3}, cu1[2] = {0, 1}, slot[1] = {1};
  forward(m, cache, {prompt, cu, slot});
  EXPECT_EQ(m.decode_graph_status().eager_decode, 0) << "a prefill step is not a decode step";
  forward(m, cache, {next, cu1, slot});
  EXPECT_EQ(m.decode_graph_status().eager_decode, 1);
  m.set_decode_graphs(false);
  const DecodeGraphStatus st = m.decode_graph_status();
  EXPECT_FALSE(st.enabled);
  EXPECT_EQ(st.summary, "off: the model runs on cpu (CUDA graphs are for models on one GPU)")
      << "the placement's reason comes first";
}

TEST(DecodeGraphCpu, TheEnvironmentTurnsGraphsOff) {
  ::setenv("KIMI_DECODE_GRAPHS", "0", 1);
  const Model off(testutil::tiny_dir("kimi-linear-tiny"));
  ::unsetenv("KIMI_DECODE_GRAPHS");
  const Model on(testutil::tiny_dir("kimi-linear-tiny"));
  EXPECT_FALSE(off.decode_graph_status().enabled);
  EXPECT_TRUE(on.decode_graph_status().enabled);
}

#ifdef KIMI_WITH_CUDA

#define REQUIRE_CUDA()        \
  if (cuda_device_count() == 0) \
  GTEST_SKIP() << "no CUDA device visible"

// A fresh model on cuda:0 (the real placement: every block of both tiny models on the GPU).
std::unique_ptr<Model> gpu_model(const std::string& config, bool graphs) {
  auto m = std::make_unique<Model>(testutil::tiny_dir(config), Device::cuda(0));
  m->set_decode_graphs(graphs);
  return m;
}

// Every byte of every pool of the cache, on the host.
std::vector<std::vector<char>> pool_bytes(Cache& c, int64_t layers) {
  std::vector<std::vector<char>> out;
  for (int64_t i = 0; i < layers; ++i) {
    Cache::Layer& L = c.layer(i);
    for (const Tensor* t : {&L.state, &L.conv_q, &L.conv_k, &L.conv_v, &L.latent}) {
      if (!t->data()) continue;
      const int64_t n = int64_t(t->nbytes());
      std::vector<char> host(static_cast<size_t>(n));
      copy(TensorView(host.data(), DType::u8, {n}), TensorView(t->data(), DType::u8, {n}, t->device()));
      out.push_back(std::move(host));
    }
  }
  return out;
}

// "" when a == b byte for byte, else where they first differ (as floats: logits and pools are f32).
std::string first_difference(const std::vector<char>& a, const std::vector<char>& b) {
  if (a.size() != b.size()) return "sizes " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
  if (std::memcmp(a.data(), b.data(), a.size()) == 0) return "";
  size_t i = 0;
  while (a[i] == b[i]) ++i;
  const size_t f = i / sizeof(float);
  float x = 0, y = 0;
  std::memcpy(&x, a.data() + f * sizeof(float), sizeof(float));
  std::memcpy(&y, b.data() + f * sizeof(float), sizeof(float));
  return "first difference at float " + std::to_string(f) + ": " + std::to_string(x) + " vs " + std::to_string(y);
}

std::vector<char> bytes_of(const Tensor& t) {
  const char* p = static_cast<const char*>(t.data());
  return std::vector<char>(p, p + t.nbytes());
}

// The same steps on the graph model and the eager model, each with its own cache; compares every step's logits.
class Twin {
 public:
  Twin(const std::string& config, int64_t max_seqs, int64_t max_len)
      : config_(config), graphs_(gpu_model(config, true)), eager_(gpu_model(config, false)),
        cg_(std::make_unique<Cache>(*graphs_, max_seqs, max_len)),
        ce_(std::make_unique<Cache>(*eager_, max_seqs, max_len)) {
    // An explicit plan: an implicit one would grow (and drop the graphs) when a later batch is larger.
    graphs_->plan(64, max_seqs), eager_->plan(64, max_seqs);
  }

  // One step of both models (sequences `lens` long, in `slots`, random tokens): EXPECTs identical logits.
  void step(const std::vector<int64_t>& lens, const std::vector<int64_t>& slots, const std::string& what,
            LogitsFor lf = LogitsFor::last) {
    std::vector<int64_t> cu{0};
    for (int64_t l : lens) cu.push_back(cu.back() + l);
    const std::vector<int32_t> tokens = random_tokens(cu.back(), ++seed_, graphs_->config().vocab_size);
    ForwardOptions opt;
    opt.logits = lf;
    const Batch b{tokens, cu, slots};
    const Tensor lg = forward(*graphs_, *cg_, b, opt);
    const Tensor le = forward(*eager_, *ce_, b, opt);
    EXPECT_EQ(first_difference(bytes_of(lg), bytes_of(le)), "")
        << config_ << ", " << what << ": graph logits != eager logits\n  graphs: " << status().summary;
  }
  // EXPECTs identical caches (every pool, every byte) and lengths.
  void same_caches(const std::string& what) {
    const int64_t L = graphs_->config().num_hidden_layers;
    const auto a = pool_bytes(*cg_, L), b = pool_bytes(*ce_, L);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_EQ(first_difference(a[i], b[i]), "") << config_ << ", " << what << ": cache pool " << i << " differs";
    for (int64_t s = 0; s < cg_->max_seqs(); ++s)
      EXPECT_EQ(cg_->length(s), ce_->length(s)) << config_ << ", " << what << ": slot " << s;
  }
  DecodeGraphStatus status() const { return graphs_->decode_graph_status(); }
  DecodeGraphStatus eager_status() const { return eager_->decode_graph_status(); }
  Model& graphs() { return *graphs_; }
  Model& eager() { return *eager_; }
  Cache& graph_cache() { return *cg_; }
  void new_caches(int64_t max_seqs, int64_t max_len) {
    cg_ = std::make_unique<Cache>(*graphs_, max_seqs, max_len);
    ce_ = std::make_unique<Cache>(*eager_, max_seqs, max_len);
  }
  void reset(int64_t slot) { cg_->reset(slot), ce_->reset(slot); }
  void reserve(int64_t max_len) { cg_->reserve(max_len), ce_->reserve(max_len); }

  // The graph model replayed `replays` steps and captured `captures` graphs so far, none refused.
  void expect_counts(int64_t replays, int64_t captures, const std::string& what) const {
    const DecodeGraphStatus st = status();
    for (const auto& [n, reason] : st.refused)
      ADD_FAILURE() << config_ << ", " << what << ": the capture of batch size " << n << " was refused: " << reason;
    EXPECT_EQ(st.replays, replays) << config_ << ", " << what << ": " << st.summary;
    EXPECT_EQ(st.captures, captures) << config_ << ", " << what << ": " << st.summary;
    EXPECT_EQ(eager_status().replays, 0) << config_ << ": the eager model never replays";
  }

 private:
  std::string config_;
  std::unique_ptr<Model> graphs_, eager_;
  std::unique_ptr<Cache> cg_, ce_;
  uint64_t seed_ = 100;
};

class DecodeGraph : public ::testing::TestWithParam<std::string> {};

TEST_P(DecodeGraph, BatchOneReplaysBitForBit) {
  REQUIRE_CUDA();
  Twin t(GetParam(), 2, 64);
  t.step({7}, {1}, "prefill");
  for (int i = 0; i < 6; ++i) t.step({1}, {1}, "decode step " + std::to_string(i));
  t.same_caches("after 6 decode steps");
  t.expect_counts(5, 1, "batch 1");  // the first decode step runs eagerly and is captured; 5 replays
  EXPECT_EQ(t.status().batch_sizes, std::vector<int64_t>{1});
  EXPECT_EQ(t.status().summary.rfind("on: 5 decode step(s) replayed from CUDA graphs, 1 eager", 0), 0u)
      << t.status().summary;
}

TEST_P(DecodeGraph, VarlenBatchOfSlotsWithDifferentLengthsReplaysBitForBit) {
  REQUIRE_CUDA();
  Twin t(GetParam(), 6, 64);
  t.step({5, 1, 12}, {4, 0, 2}, "prefill of 3 sequences");
  for (int i = 0; i < 5; ++i) t.step({1, 1, 1}, {2, 4, 0}, "decode step " + std::to_string(i) + " (slots 2, 4, 0)");
  // Every logits row (LogitsFor::all: the same rows for one token per sequence) and another slot order.
  t.step({1, 1, 1}, {0, 2, 4}, "decode, slots 0, 2, 4, all logits", LogitsFor::all);
  t.same_caches("after 6 varlen decode steps");
  t.expect_counts(5, 1, "varlen batch of 3");
  EXPECT_EQ(t.status().batch_sizes, std::vector<int64_t>{3});
}

TEST_P(DecodeGraph, ReplayAfterOneSlotIsResetAndPrefilledAgain) {
  REQUIRE_CUDA();
  Twin t(GetParam(), 4, 64);
  t.step({6, 3}, {0, 3}, "prefill");
  for (int i = 0; i < 3; ++i) t.step({1, 1}, {0, 3}, "decode " + std::to_string(i));
  t.reset(3);
  t.same_caches("after resetting slot 3");
  t.step({4}, {3}, "prefill of the reset slot");
  for (int i = 0; i < 3; ++i) t.step({1, 1}, {0, 3}, "decode after the reset " + std::to_string(i));
  t.same_caches("after the reset and 3 decode steps");
  t.expect_counts(5, 1, "reset");  // the batch-2 graph of before the reset is replayed after it
}

TEST_P(DecodeGraph, ANewBatchSizeCapturesANewGraphAndTheOldOneStillReplays) {
  REQUIRE_CUDA();
  Twin t(GetParam(), 4, 64);
  t.step({3, 5, 2}, {0, 1, 2}, "prefill");
  t.step({1, 1, 1}, {0, 1, 2}, "decode N=3 (capture)");
  t.step({1, 1, 1}, {0, 1, 2}, "decode N=3 (replay)");
  t.step({1, 1}, {2, 0}, "decode N=2 (capture)");
  t.step({1, 1}, {1, 2}, "decode N=2 (replay, other slots)");
  t.step({1, 1, 1}, {1, 2, 0}, "decode N=3 (replay)");
  t.same_caches("after N = 3, 2, 3");
  t.expect_counts(3, 2, "two batch sizes");
  EXPECT_EQ(t.status().batch_sizes, (std::vector<int64_t>{2, 3}));
}

TEST_P(DecodeGraph, PrefillAndMixedStepsStayEagerAndEqual) {
  REQUIRE_CUDA();
  Twin t(GetParam(), 4, 64);
  t.step({4, 2}, {0, 1}, "prefill");
  t.step({1, 1}, {0, 1}, "decode (capture)");
  const DecodeGraphStatus before = t.status();
  t.step({3, 1}, {0, 1}, "mixed: chunked prefill beside a decode", LogitsFor::all);
  t.step({1, 5}, {2, 1}, "mixed: a new sequence beside a prefill chunk");
  t.step({1, 1}, {0, 1}, "decode (replay)");
  t.same_caches("after prefill / mixed / decode");
  t.expect_counts(1, 1, "mixed");
  EXPECT_EQ(t.status().eager_decode, before.eager_decode) << "prefill and mixed steps are not decode steps";
}

TEST_P(DecodeGraph, AFreshSequenceInADecodeStepRunsEagerlyAndEqual) {
  REQUIRE_CUDA();
  Twin t(GetParam(), 4, 64);
  t.step({4, 2}, {0, 1}, "prefill");
  t.step({1, 1}, {0, 1}, "decode (capture)");
  t.step({1, 1}, {0, 2}, "decode with slot 2's first token");  // a fresh sequence: the prefill form of MLA
  t.step({1, 1}, {0, 2}, "decode (replay)");
  t.same_caches("after a fresh sequence");
  t.expect_counts(1, 1, "fresh sequence");
  EXPECT_EQ(t.status().eager_decode, 2);
}

TEST_P(DecodeGraph, ARePlanANewCacheAndANewDtypeDropTheGraphs) {
  REQUIRE_CUDA();
  Twin t(GetParam(), 4, 64);
  t.step({3, 4}, {0, 1}, "prefill");
  t.step({1, 1}, {0, 1}, "decode (capture)");
  t.step({1, 1}, {0, 1}, "decode (replay)");
  t.expect_counts(1, 1, "before the re-plan");
  t.graphs().plan(64, 4), t.eager().plan(64, 4);
  EXPECT_TRUE(t.status().batch_sizes.empty()) << "a plan drops the graphs: " << t.status().summary;
  t.step({1, 1}, {0, 1}, "decode after the plan (capture)");
  t.step({1, 1}, {0, 1}, "decode after the plan (replay)");
  t.expect_counts(2, 2, "after the re-plan");

  t.new_caches(4, 32);
  t.step({2, 2}, {3, 1}, "prefill in the new cache");
  t.step({1, 1}, {3, 1}, "decode in the new cache (capture)");
  t.step({1, 1}, {3, 1}, "decode in the new cache (replay)");
  t.same_caches("in the new cache");
  t.expect_counts(3, 3, "after the new cache");

  t.reserve(48);  // the MLA pools move and grow: a new generation
  t.step({1, 1}, {3, 1}, "decode after reserve (capture)");
  t.step({1, 1}, {3, 1}, "decode after reserve (replay)");
  t.expect_counts(4, 4, "after Cache::reserve");

  t.graphs().set_activation_dtype(DType::f32), t.eager().set_activation_dtype(DType::f32);
  t.step({1, 1}, {3, 1}, "decode in f32 (capture)");
  t.step({1, 1}, {3, 1}, "decode in f32 (replay)");
  t.expect_counts(5, 5, "after the dtype change");
}

TEST_P(DecodeGraph, BadInputIsRefusedBeforeAnyWriteAndTheGraphStillReplays) {
  REQUIRE_CUDA();
  Twin t(GetParam(), 3, 16);
  t.step({4, 3, 16}, {0, 1, 2}, "prefill (slot 2 full: max_len 16)");
  t.step({1, 1}, {0, 1}, "decode (capture)");
  t.step({1, 1}, {0, 1}, "decode (replay)");
  Model& m = t.graphs();
  Cache& c = t.graph_cache();
  const int64_t L = m.config().num_hidden_layers, V = m.config().vocab_size;
  const auto before = pool_bytes(c, L);
  const int64_t lens[3] = {c.length(0), c.length(1), c.length(2)};
  const int64_t cu[3] = {0, 1, 2}, slots[2] = {0, 1}, same[2] = {1, 1}, out_of_range[2] = {0, 3};
  const int32_t bad_token[2] = {1, int32_t(V)}, good[2] = {1, 2};
  EXPECT_KIMI_ERROR(forward(m, c, {bad_token, cu, slots}), "forward", "batch.tokens",
                    ("tokens[1] = " + std::to_string(V)).c_str());
  EXPECT_KIMI_ERROR(forward(m, c, {good, cu, same}), "forward", "batch.slots");
  EXPECT_KIMI_ERROR(forward(m, c, {good, cu, out_of_range}), "forward", "batch.slots");
  std::vector<float> small(static_cast<size_t>(V));  // one row of logits for two sequences
  EXPECT_KIMI_ERROR(forward_into(m, c, {good, cu, slots}, TensorView(small.data(), DType::f32, {1, V})), "forward",
                    "logits");
  const int64_t cu3[4] = {0, 1, 2, 3}, slots3[3] = {0, 1, 2};
  const int32_t good3[3] = {1, 2, 3};
  EXPECT_KIMI_ERROR(forward(m, c, {good3, cu3, slots3}), "forward", "batch", "max_len = 16", "slot 2");
  const auto after = pool_bytes(c, L);
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i)
    EXPECT_EQ(first_difference(after[i], before[i]), "") << GetParam() << ": cache pool " << i
                                                         << " changed by a refused step";
  for (int64_t s = 0; s < 3; ++s) EXPECT_EQ(c.length(s), lens[s]) << "slot " << s;
  t.step({1, 1}, {0, 1}, "decode after the refusals (replay)");
  t.same_caches("after the refusals");
  t.expect_counts(2, 1, "refusals");
}

TEST_P(DecodeGraph, AnOnLayerCallbackRunsTheDecodeStepEagerly) {
  REQUIRE_CUDA();
  Twin t(GetParam(), 2, 32);
  t.step({3}, {0}, "prefill");
  t.step({1}, {0}, "decode (capture)");
  Model& m = t.graphs();
  Cache& c = t.graph_cache();
  const DecodeGraphStatus before = t.status();
  ForwardOptions opt;
  int64_t layers = 0;
  opt.on_layer = [&](int64_t, TensorView) { ++layers; };
  const int32_t tok[1] = {5};
  const int64_t cu[2] = {0, 1}, slot[1] = {0};
  forward(m, c, {tok, cu, slot}, opt);
  EXPECT_EQ(layers, m.config().num_hidden_layers + 1);
  EXPECT_EQ(t.status().replays, before.replays);
  EXPECT_EQ(t.status().eager_decode, before.eager_decode + 1);
}

INSTANTIATE_TEST_SUITE_P(Tiny, DecodeGraph, ::testing::Values("kimi-linear-tiny", "k3-tiny"),
                         [](const auto& info) { return info.param == "k3-tiny" ? "K3" : "KimiLinear"; });

TEST(DecodeGraphDevices, APlacementOverTwoDevicesRunsEagerlyAndSaysWhy) {
  REQUIRE_CUDA();
  const NoteHandler old = set_note_handler([](std::string_view) {});
  const Model m(testutil::tiny_dir("kimi-linear-tiny"), Device::cuda(0), [](std::string_view op, Device d) {
    return op_supported(op, d) && op != "mla_prefill";  // the MLA mixers on the CPU
  });
  set_note_handler(old);
  Cache c(m, 2, 16);
  const int32_t p[3] = {1, 2, 3}, t1[1] = {4};
  const int64_t cu[2] = {0, 3}, cu1[2] = {0, 1}, slot[1] = {0};
  forward(m, c, {p, cu, slot});
  forward(m, c, {t1, cu1, slot});
  forward(m, c, {t1, cu1, slot});
  const DecodeGraphStatus st = m.decode_graph_status();
  EXPECT_FALSE(st.supported);
  EXPECT_EQ(st.summary.rfind("off: the placement spans ", 0), 0u) << st.summary;
  EXPECT_NE(st.summary.find("cpu"), std::string::npos) << st.summary;
  EXPECT_NE(st.summary.find("cuda:0"), std::string::npos) << st.summary;
  EXPECT_EQ(st.replays, 0);
  EXPECT_EQ(st.eager_decode, 2);
}

TEST(DecodeGraphDevices, TurnedOffTheStatusSaysSo) {
  REQUIRE_CUDA();
  auto m = gpu_model("kimi-linear-tiny", false);
  EXPECT_EQ(m->decode_graph_status().summary,
            "off: turned off (Model::set_decode_graphs(false); every decode step launches its kernels eagerly)");
  m->set_decode_graphs(true);
  EXPECT_EQ(m->decode_graph_status().summary, "on: 0 decode step(s) replayed from CUDA graphs, 0 eager");
}

#endif  // KIMI_WITH_CUDA

}  // namespace
}  // namespace kimi::model
