// The model runtime (docs/model/runtime.md) on the CPU: the activation dtype policy (bf16 against the fp32 model,
// which test_parity.cpp ties to the fp64 / transformers references), the planned step (Model::plan: no allocation
// inside a planned forward, batches larger than the plan refused before any write, implicit plans that grow), and
// the MLA block's per-step tables (fresh and continuing sequences interleaved in one batch).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "expect_error.h"
#include "kimi/device.h"
#include "kimi/model/checkpoint.h"
#include "kimi/model/generate.h"
#include "kimi/model/model.h"
#include "model_testutil.h"

namespace kimi::model {
namespace {

using testutil::random_tokens;
using testutil::rel_err;

// A tiny config with every expert routed (top-k = all experts): without a top-k cut the model is a smooth
// function of its block inputs, so the error of bf16 activations is their rounding, not a routing decision that
// flips (the random tiny routers have top-k gaps down to 1.4e-4: docs/model/runtime.md).
std::string all_experts_dir(const std::string& name) {
  Config c = named_config(name);
  c.num_experts_per_token = c.num_experts;
  return testutil::random_checkpoint_dir("all-experts-" + name, c, name == "k3-tiny");
}

int32_t argmax(const float* row, int64_t n) { return int32_t(std::max_element(row, row + n) - row); }

// The parity fixtures' protocol (test_parity.cpp) with the fp32 model as the reference: for prompts of 13, 1
// and 70 tokens, the logits of every prompt position (one prefill) and of 8 decode steps teacher-forced on the
// reference's greedy tokens.
struct Rows {
  std::vector<std::vector<float>> rows;  // logits rows, in order
};
Rows run_protocol(const Model& m, const std::vector<std::vector<int32_t>>& prompts, const std::vector<std::vector<int32_t>>& forced) {
  Rows r;
  const int64_t V = m.config().vocab_size;
  for (size_t p = 0; p < prompts.size(); ++p) {
    const std::vector<int32_t>& prompt = prompts[p];
    const int64_t T = int64_t(prompt.size());
    Cache cache(m, 1, T + 8);
    ForwardOptions opt;
    opt.logits = LogitsFor::all;
    const int64_t cu[2] = {0, T}, slot[1] = {0};
    const Tensor l = forward(m, cache, {prompt, cu, slot}, opt);
    for (int64_t t = 0; t < T; ++t) r.rows.emplace_back(l.data_as<float>() + t * V, l.data_as<float>() + (t + 1) * V);
    for (const int32_t tok : forced[p]) {
      const int64_t cu1[2] = {0, 1};
      const Tensor s = forward(m, cache, {std::span(&tok, 1), cu1, slot});
      r.rows.emplace_back(s.data_as<float>(), s.data_as<float>() + V);
    }
  }
  return r;
}

// Bounds: the measured worst (docs/model/runtime.md) with a margin of ~1.5x. These random tiny models amplify a
// perturbation of their block inputs strongly: rounding ONLY the block inputs to bf16 in an otherwise fp32 model
// (an experiment, not a mode of the runtime) moves the logits by 8.5e-2 (k3-tiny) and 2.5e-2 (kimi-linear-tiny);
// the bf16 policy (inputs and every temporary in bf16) measured 1.38e-1 and 5.0e-2, i.e. 1.6x and 2x that floor,
// within the 2-3x of the same-precision reference that the style guide asks of a low-precision kernel. The fp32
// model is the reference: it is within 1.7e-5 of the fp64 / transformers references (test_parity.cpp), 4000x
// below these bounds.
double bf16_bound(const std::string& config) { return config == "k3-tiny" ? 0.2 : 0.075; }
// Identical greedy tokens (argmax) of the 108 logits rows (84 prompt positions, 3 x 8 decode steps): measured 103
// (k3-tiny) and 102 (kimi-linear-tiny); the others are near-ties of the fp32 logits.
constexpr int64_t kBf16GreedyFloor = 100;

class Bf16 : public ::testing::TestWithParam<const char*> {};

TEST_P(Bf16, LogitsAndGreedyTokensMatchTheFp32Model) {
  const std::string dir = all_experts_dir(GetParam());
  Model f32(dir), bf16(dir);
  EXPECT_EQ(f32.activation_dtype(), DType::f32);  // the CPU's default
  bf16.set_activation_dtype(DType::bf16);
  EXPECT_EQ(bf16.activation_dtype(), DType::bf16);
  const int64_t V = f32.config().vocab_size;
  std::vector<std::vector<int32_t>> prompts;
  for (const int64_t T : {13, 1, 70}) prompts.push_back(random_tokens(T, uint64_t(2026 + T), V));
  // the fp32 model's greedy tokens, teacher-forced into both
  std::vector<std::vector<int32_t>> forced(prompts.size());
  for (size_t p = 0; p < prompts.size(); ++p) {
    GenerateOptions g;
    g.max_new_tokens = 8;
    forced[p] = generate(f32, std::vector<std::vector<int32_t>>{prompts[p]}, g).tokens[0];
  }
  const Rows want = run_protocol(f32, prompts, forced), got = run_protocol(bf16, prompts, forced);
  ASSERT_EQ(got.rows.size(), want.rows.size());
  double worst = 0, worst_abs = 0;
  for (size_t i = 0; i < want.rows.size(); ++i) {
    const double e = rel_err(got.rows[i], want.rows[i]);
    worst = std::max(worst, e);
    for (int64_t v = 0; v < V; ++v) worst_abs = std::max(worst_abs, double(std::abs(got.rows[i][size_t(v)] - want.rows[i][size_t(v)])));
    EXPECT_LE(e, bf16_bound(GetParam())) << GetParam() << " logits row " << i;
  }
  int64_t same = 0;
  for (size_t i = 0; i < want.rows.size(); ++i) same += argmax(got.rows[i].data(), V) == argmax(want.rows[i].data(), V);
  EXPECT_GE(same, kBf16GreedyFloor) << GetParam() << ": identical greedy tokens of " << want.rows.size();
  std::printf("%s, every expert routed: bf16 vs fp32 logits: worst relative error %.2e, worst absolute %.2e; greedy "
              "tokens identical %lld of %lld\n",
              GetParam(), worst, worst_abs, (long long)same, (long long)want.rows.size());
}

INSTANTIATE_TEST_SUITE_P(Tiny, Bf16, ::testing::Values("k3-tiny", "kimi-linear-tiny"),
                         [](const auto& info) { return std::string(info.param == std::string("k3-tiny") ? "K3" : "KimiLinear"); });

// ---- the planned step ----

// name by value (not a reference to a temporary string): the returned Model outlives the call
const Model& tiny(std::string_view name) {
  static std::map<std::string, std::unique_ptr<Model>, std::less<>> models;
  auto it = models.find(name);
  if (it == models.end()) it = models.emplace(std::string(name), std::make_unique<Model>(testutil::tiny_dir(std::string(name)))).first;
  return *it->second;
}

// Steps of every kind through forward_into after Model::plan: a varlen prefill, a decode step, a chunked
// continuation mixed with a fresh sequence (MLA rows reordered), all logits; device_alloc_count (every Tensor
// allocation, host or device) must not move.
void expect_no_allocation(const Model& m, const std::string& what) {
  const int64_t V = m.config().vocab_size;
  m.plan(64, 4);
  Cache cache(m, 4, 128);
  Tensor logits(DType::f32, {64, V});
  const std::vector<int32_t> tok = random_tokens(64, 9, V);
  const uint64_t before = device_alloc_count();
  const int64_t cu[4] = {0, 20, 21, 40}, slots[3] = {2, 0, 1};
  forward_into(m, cache, {std::span(tok.data(), 40), cu, slots}, logits.view().slice(0, 0, 3));
  const int64_t cu1[4] = {0, 1, 2, 3};
  forward_into(m, cache, {std::span(tok.data(), 3), cu1, slots}, logits.view().slice(0, 0, 3));
  const int64_t cu2[3] = {0, 7, 64}, slots2[2] = {0, 3};  // slot 0 continues, slot 3 is fresh
  ForwardOptions all;
  all.logits = LogitsFor::all;
  forward_into(m, cache, {tok, cu2, slots2}, logits, all);
  EXPECT_EQ(device_alloc_count(), before) << what << ": allocations inside planned steps";
  for (int64_t i = 0; i < logits.numel(); ++i) ASSERT_TRUE(std::isfinite(logits.data_as<float>()[i])) << what;
}

TEST(Plan, APlannedStepAllocatesNothing) {
  for (const char* name : {"k3-tiny", "kimi-linear-tiny"}) {
    Model m(testutil::tiny_dir(name));
    expect_no_allocation(m, std::string(name) + " f32");
    m.set_activation_dtype(DType::bf16);
    expect_no_allocation(m, std::string(name) + " bf16");
    // blocks alternating between the host and a second host device: every crossing, too, within the plan
    const Device other{DeviceType::cpu, 1};
    const Placement p = place_blocks(m.config(), other, [&](BlockKind, int64_t layer, size_t ordinal) {
      return (ordinal + size_t(layer)) % 2 ? other : Device::cpu();
    });
    const Model x(testutil::tiny_dir(name), p);
    expect_no_allocation(x, std::string(name) + " on two host devices");
    const StepPlanInfo info = x.planned();
    EXPECT_EQ(info.max_tokens, 64);
    EXPECT_EQ(info.max_seqs, 4);
    EXPECT_TRUE(info.explicit_plan);
    ASSERT_EQ(info.arena_bytes.size(), 2u);  // the host (tables, its blocks) and cpu:1
    EXPECT_EQ(info.arena_bytes[0].first, Device::cpu());
    EXPECT_EQ(info.arena_bytes[1].first, other);
  }
}

TEST(Plan, ABatchLargerThanThePlanIsRefusedBeforeAnyWrite) {
  const Model m(testutil::tiny_dir("k3-tiny"));
  const int64_t V = m.config().vocab_size;
  const std::vector<int32_t> tok = random_tokens(12, 4, V);
  m.plan(8, 2);
  Cache cache(m, 3, 32), clean(m, 3, 32);
  const int64_t cu5[2] = {0, 5}, slot0[1] = {0};
  forward(m, cache, {std::span(tok.data(), 5), cu5, slot0});
  forward(m, clean, {std::span(tok.data(), 5), cu5, slot0});
  const int64_t cu9[2] = {0, 9};
  EXPECT_KIMI_ERROR(forward(m, cache, {std::span(tok.data(), 9), cu9, slot0}), "forward", "'batch.tokens'",
                    "at most 8 tokens (Model::plan's max_tokens)", "got 9");
  const int64_t cu3[4] = {0, 1, 2, 3}, slots3[3] = {0, 1, 2};
  EXPECT_KIMI_ERROR(forward(m, cache, {std::span(tok.data(), 3), cu3, slots3}), "forward", "'batch.cu_seqlens'",
                    "at most 2 sequences (Model::plan's max_seqs)", "got 3");
  Tensor small(DType::f32, {2, V});
  const int64_t cu1[2] = {0, 1};
  EXPECT_KIMI_ERROR(forward_into(m, cache, {std::span(tok.data(), 1), cu1, slot0}, small), "forward", "'logits'",
                    "[1, 512]", "[2, 512]");
  // logits live on the host or on the head's device (here the host): another device is refused
  TensorView elsewhere = small.view().slice(0, 0, 1);
  elsewhere.device = Device{DeviceType::cpu, 1};
  EXPECT_KIMI_ERROR(forward_into(m, cache, {std::span(tok.data(), 1), cu1, slot0}, elsewhere),
                    "forward: argument 'logits': expected device cpu, got cpu:1");
  EXPECT_EQ(cache.length(0), 5);
  EXPECT_EQ(cache.length(1), 0);
  // nothing changed: the next steps equal those of a cache that saw no refused batch
  const int64_t cu3b[2] = {0, 3};
  const Tensor a = forward(m, cache, {std::span(tok.data() + 5, 3), cu3b, slot0});
  const Tensor b = forward(m, clean, {std::span(tok.data() + 5, 3), cu3b, slot0});
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.nbytes()), 0);
  const Tensor a2 = forward(m, cache, {std::span(tok.data() + 8, 1), cu1, slot0});
  const Tensor b2 = forward(m, clean, {std::span(tok.data() + 8, 1), cu1, slot0});
  EXPECT_EQ(std::memcmp(a2.data(), b2.data(), a2.nbytes()), 0);
}

TEST(Plan, ArgumentsAreValidated) {
  Model m(testutil::tiny_dir("kimi-linear-tiny"));
  EXPECT_KIMI_ERROR(m.plan(0, 1), "Model::plan", "'max_tokens'", ">= 1", "got 0");
  EXPECT_KIMI_ERROR(m.plan(4, 5), "Model::plan", "'max_seqs'", "[1, max_tokens = 4]", "got 5");
  EXPECT_KIMI_ERROR(m.plan(4, 0), "Model::plan", "'max_seqs'", "got 0");
  EXPECT_KIMI_ERROR(m.set_activation_dtype(DType::f16), "Model::set_activation_dtype", "'activation_dtype'",
                    "f32 or bf16", "got f16");
  EXPECT_KIMI_ERROR(m.set_activation_dtype(DType::i32), "'activation_dtype'", "got i32");
  Cache cache(m, 1, 4);
  const int32_t tok[1] = {1};
  EXPECT_KIMI_ERROR(forward(m, cache, {tok, {}, {}}), "forward", "'batch.cu_seqlens'", "at least 2 offsets", "got 0");
  EXPECT_EQ(m.planned().max_tokens, 0);  // nothing planned by the refused calls
}

TEST(Plan, AForwardFromInsideAForwardIsRefused) {
  const Model m(testutil::tiny_dir("kimi-linear-tiny"));
  Cache cache(m, 2, 8), other(m, 2, 8);
  const int32_t tok[2] = {3, 4};
  const int64_t cu[2] = {0, 2}, slot[1] = {0};
  ForwardOptions opt;
  opt.on_layer = [&](int64_t layer, TensorView) {
    if (layer == 0) forward(m, other, {tok, cu, slot});
  };
  EXPECT_KIMI_ERROR(forward(m, cache, {tok, cu, slot}, opt), "forward: called from inside a forward on the same Model");
  EXPECT_EQ(cache.length(0), 0);  // the failed step's slots are emptied
  EXPECT_EQ(other.length(0), 0);
  forward(m, cache, {tok, cu, slot});  // the lock was released
  EXPECT_EQ(cache.length(0), 2);
}

TEST(Plan, ForwardWithoutAPlanPlansForItsBatchAndKeepsTheLarger) {
  const Model m(testutil::tiny_dir("kimi-linear-tiny"));
  const int64_t V = m.config().vocab_size;
  EXPECT_EQ(m.planned().max_tokens, 0);
  const std::vector<int32_t> tok = random_tokens(30, 2, V);
  Cache cache(m, 4, 64);
  auto step = [&](int64_t T, int64_t N) {
    std::vector<int64_t> cu{0}, slots;
    for (int64_t n = 0; n < N; ++n) cu.push_back(T * (n + 1) / N), slots.push_back(n);
    forward(m, cache, {std::span(tok.data(), size_t(T)), cu, slots});
    for (int64_t n = 0; n < N; ++n) cache.reset(n);
    const StepPlanInfo p = m.planned();
    EXPECT_FALSE(p.explicit_plan);
    return std::vector<int64_t>{p.max_tokens, p.max_seqs};
  };
  EXPECT_EQ(step(10, 1), (std::vector<int64_t>{10, 1}));
  EXPECT_EQ(step(4, 2), (std::vector<int64_t>{10, 2}));
  EXPECT_EQ(step(30, 3), (std::vector<int64_t>{30, 3}));
  EXPECT_EQ(step(5, 1), (std::vector<int64_t>{30, 3}));
}

TEST(Plan, GenerateStepsAllocateNothing) {
  const Model& m = tiny("k3-tiny");
  const std::vector<std::vector<int32_t>> prompts = {random_tokens(7, 1, 512), random_tokens(3, 2, 512)};
  GenerateOptions g;
  g.max_new_tokens = 2;
  generate(m, prompts, g);  // plans the model
  auto allocations = [&](int64_t n) {
    g.max_new_tokens = n;
    const uint64_t before = device_alloc_count();
    const GenerateResult r = generate(m, prompts, g);
    EXPECT_EQ(r.decode_tokens, 2 * (n - 1));
    return device_alloc_count() - before;
  };
  // the cache and one logits buffer per generate call; no step adds any
  EXPECT_EQ(allocations(12), allocations(2));
}

// ---- the MLA block's per-step tables ----

// Fresh and continuing sequences interleaved in one batch (the MLA rows are gathered fresh-first and back):
// each sequence's logits equal its run alone.
TEST(Plan, InterleavedFreshAndContinuingSequencesMatchEachAlone) {
  for (const char* name : {"k3-tiny", "kimi-linear-tiny"}) {
    const Model& m = tiny(name);
    const int64_t V = m.config().vocab_size;
    const std::vector<int32_t> a = random_tokens(9, 11, V), b = random_tokens(5, 12, V), c = random_tokens(1, 13, V);
    Cache cache(m, 3, 16);
    const int64_t cu6[2] = {0, 6}, slot1[1] = {1};
    forward(m, cache, {std::span(a.data(), 6), cu6, slot1});  // a's first 6 tokens in slot 1
    // batch: b fresh in slot 0, a continuing with 3 tokens in slot 1, c fresh in slot 2
    std::vector<int32_t> packed(b.begin(), b.end());
    packed.insert(packed.end(), a.begin() + 6, a.end());
    packed.insert(packed.end(), c.begin(), c.end());
    const int64_t cu[4] = {0, 5, 8, 9}, slots[3] = {0, 1, 2};
    ForwardOptions all;
    all.logits = LogitsFor::all;
    const Tensor got = forward(m, cache, {packed, cu, slots}, all);
    const std::vector<float> la = testutil::logits_in_pieces(m, a, {6, 3}), lb = testutil::logits_in_pieces(m, b, {5}),
                             lc = testutil::logits_in_pieces(m, c, {1});
    auto rows = [&](int64_t r0, int64_t r1) {
      return std::vector<float>(got.data_as<float>() + r0 * V, got.data_as<float>() + r1 * V);
    };
    EXPECT_LE(rel_err(rows(0, 5), lb), 2e-5) << name << " fresh sequence b";
    EXPECT_LE(rel_err(rows(5, 8), std::vector<float>(la.end() - 3 * V, la.end())), 2e-5) << name << " continuing a";
    EXPECT_LE(rel_err(rows(8, 9), lc), 2e-5) << name << " fresh sequence c";
    EXPECT_EQ(cache.length(1), 9);
    // fresh sequences first (the rows stay in place): d fresh in slot 3, then a continuing with its last token
    const std::vector<int32_t> d = random_tokens(4, 14, V);
    Cache cache2(m, 4, 16);
    const int64_t cu8[2] = {0, 8};
    forward(m, cache2, {std::span(a.data(), 8), cu8, slot1});
    std::vector<int32_t> packed2(d.begin(), d.end());
    packed2.push_back(a[8]);
    const int64_t cu2[3] = {0, 4, 5}, slots2[2] = {3, 1};
    const Tensor got2 = forward(m, cache2, {packed2, cu2, slots2}, all);
    const std::vector<float> ld = testutil::logits_in_pieces(m, d, {4});
    EXPECT_LE(rel_err(std::vector<float>(got2.data_as<float>(), got2.data_as<float>() + 4 * V), ld), 2e-5) << name << " fresh d";
    EXPECT_LE(rel_err(std::vector<float>(got2.data_as<float>() + 4 * V, got2.data_as<float>() + 5 * V),
                      std::vector<float>(la.end() - V, la.end())),
              2e-5)
        << name << " continuing a after fresh d";
  }
}

}  // namespace
}  // namespace kimi::model
