// kimi/model/model.h and generate.h on random tiny models of both families (every K3 switch on in
// k3-tiny, all off in kimi-linear-tiny; KDA and MLA layers, dense and MoE FFNs, MXFP4 experts):
//   - cache consistency: prefill(T) == prefill(T - n) + n single-token decode steps == chunked prefill,
//     for the logits of every position (fp32; the KDA chunk and recurrent forms and the MLA explicit and
//     absorbed forms agree to rounding);
//   - batching: a varlen batch in arbitrary slots == each sequence alone;
//   - per-layer trace: the embedding and every layer reported, final logits finite;
//   - sampling: greedy, top-k 1, tiny top-p, seeded reproducibility, parameter errors;
//   - bad batches rejected before the cache changes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "expect_error.h"
#include "kimi/model/generate.h"
#include "kimi/model/model.h"
#include "model/weights.h"
#include "model_testutil.h"

namespace kimi::model {
namespace {

using testutil::random_tokens;

// One model per tiny config, on the CPU.
const Model* tiny(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Model>> models;
  auto& m = models[name];
  if (!m) m = std::make_unique<Model>(testutil::tiny_dir(name));
  return m.get();
}

// Logits of every position of `tokens`, fed to slot 0 of a fresh cache in pieces of the given sizes.
std::vector<float> logits_in_pieces(const Model& m, const std::vector<int32_t>& tokens, const std::vector<int64_t>& pieces) {
  return testutil::logits_in_pieces(m, tokens, pieces);
}

double rel_err(const std::vector<float>& a, const std::vector<float>& b) { return testutil::rel_err(a, b); }

// The bytes of a cache: all layers' states and conv caches, and the MLA latent rows of `latent_slot` (all
// slots when -1; latent rows past a slot's length are never read, so an emptied slot may keep stale ones).
std::vector<uint8_t> cache_bytes(const Cache& cache, int64_t layers, int64_t latent_slot = -1) {
  std::vector<uint8_t> b;
  auto add = [&](const void* p, size_t n) { b.insert(b.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n); };
  for (int64_t i = 0; i < layers; ++i) {
    const Cache::Layer& L = cache.layer(i);
    for (const Tensor* t : {&L.state, &L.conv_q, &L.conv_k, &L.conv_v})
      if (t->data()) add(t->data(), t->nbytes());
    if (!L.latent.data()) continue;
    const size_t row = L.latent.nbytes() / size_t(cache.max_seqs());
    if (latent_slot < 0)
      add(L.latent.data(), L.latent.nbytes());
    else
      add(static_cast<const uint8_t*>(L.latent.data()) + size_t(latent_slot) * row, row);
  }
  return b;
}

// The bytes of one slot's rows in every cache tensor (states, conv caches, latents).
std::vector<uint8_t> slot_bytes(const Cache& cache, int64_t layers, int64_t slot) {
  std::vector<uint8_t> b;
  for (int64_t i = 0; i < layers; ++i) {
    const Cache::Layer& L = cache.layer(i);
    for (const Tensor* t : {&L.state, &L.conv_q, &L.conv_k, &L.conv_v, &L.latent}) {
      if (!t->data()) continue;
      const size_t row = t->nbytes() / size_t(cache.max_seqs());
      const uint8_t* p = static_cast<const uint8_t*>(t->data()) + size_t(slot) * row;
      b.insert(b.end(), p, p + row);
    }
  }
  return b;
}

class ModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelTest, PrefillThenDecodeMatchesOnePrefill) {
  const Model& m = *tiny(GetParam());
  // 70 tokens cross the 64-token KDA chunk; the MLA layers see both the explicit and the absorbed form.
  const std::vector<int32_t> tokens = random_tokens(70, 3, m.config().vocab_size);
  const std::vector<float> whole = logits_in_pieces(m, tokens, {70});
  for (const std::vector<int64_t>& pieces : std::vector<std::vector<int64_t>>{{66, 1, 1, 1, 1}, {1, 1, 1, 67}, {13, 40, 17}}) {
    const std::vector<float> split = logits_in_pieces(m, tokens, pieces);
    ASSERT_EQ(split.size(), whole.size());
    EXPECT_LE(rel_err(split, whole), 2e-5) << GetParam() << " pieces of " << pieces[0] << ", " << pieces[1] << ", ...";
    for (float v : split) ASSERT_TRUE(std::isfinite(v));
  }
}

TEST_P(ModelTest, VarlenBatchInSlotsMatchesEachSequenceAlone) {
  const Model& m = *tiny(GetParam());
  const int64_t V = m.config().vocab_size;
  const std::vector<std::vector<int32_t>> seqs = {random_tokens(9, 5, V), random_tokens(1, 6, V), random_tokens(30, 7, V)};
  std::vector<int32_t> packed;
  std::vector<int64_t> cu{0};
  for (const auto& s : seqs) packed.insert(packed.end(), s.begin(), s.end()), cu.push_back(int64_t(packed.size()));
  const int64_t slots[3] = {3, 0, 1};
  Cache cache(m.config(), 4, 40);
  const std::vector<uint8_t> slot2 = slot_bytes(cache, m.config().num_hidden_layers, 2);
  const Tensor batch = forward(m, cache, {packed, cu, slots});
  // one decode step for all three, in a different order than the prefill
  const int32_t next[3] = {5, 6, 7};
  const int64_t cu1[4] = {0, 1, 2, 3}, slots1[3] = {1, 3, 0};
  const Tensor step = forward(m, cache, {next, cu1, slots1});
  EXPECT_EQ(cache.length(3), 10);
  EXPECT_EQ(cache.length(2), 0);
  EXPECT_EQ(slot_bytes(cache, m.config().num_hidden_layers, 2), slot2);  // a slot outside the batch: untouched
  const int64_t order[3] = {2, 0, 1};  // step row r is sequence order[r]
  for (int64_t n = 0; n < 3; ++n) {
    std::vector<int32_t> alone = seqs[size_t(n)];
    const std::vector<float> ref = logits_in_pieces(m, alone, {int64_t(alone.size())});
    std::vector<float> got(batch.data_as<float>() + n * V, batch.data_as<float>() + (n + 1) * V);
    std::vector<float> want(ref.end() - V, ref.end());
    EXPECT_LE(rel_err(got, want), 1e-5) << GetParam() << " sequence " << n;
    alone.push_back(next[n == 0 ? 1 : n == 1 ? 2 : 0]);
    const std::vector<float> ref2 = logits_in_pieces(m, alone, {int64_t(alone.size())});
    int64_t r = 0;
    while (order[r] != n) ++r;
    got.assign(step.data_as<float>() + r * V, step.data_as<float>() + (r + 1) * V);
    want.assign(ref2.end() - V, ref2.end());
    EXPECT_LE(rel_err(got, want), 2e-5) << GetParam() << " sequence " << n << " decode";
  }
}

TEST_P(ModelTest, TraceReportsEveryLayer) {
  const Model& m = *tiny(GetParam());
  const std::vector<int32_t> tokens = random_tokens(5, 8, m.config().vocab_size);
  Cache cache(m.config(), 1, 5);
  std::vector<int64_t> seen;
  ForwardOptions opt;
  opt.on_layer = [&](int64_t layer, TensorView h) {
    seen.push_back(layer);
    EXPECT_EQ(h.shape_string(), "[5, 256]");
    for (int64_t i = 0; i < 5 * 256; ++i) ASSERT_TRUE(std::isfinite(static_cast<const float*>(h.data)[i]));
  };
  const int64_t cu[2] = {0, 5}, slot[1] = {0};
  forward(m, cache, {tokens, cu, slot}, opt);
  ASSERT_EQ(int64_t(seen.size()), m.config().num_hidden_layers + 1);
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], int64_t(i) - 1);
}

TEST_P(ModelTest, GenerateIsDeterministicAndHonoursStops) {
  const Model& m = *tiny(GetParam());
  const std::vector<std::vector<int32_t>> prompts = {{1, 2, 3}, {4}};
  GenerateOptions g;
  g.max_new_tokens = 6;
  const GenerateResult a = generate(m, prompts, g);
  ASSERT_EQ(a.tokens.size(), 2u);
  EXPECT_EQ(a.tokens[0].size(), 6u);
  EXPECT_EQ(a.prefill_tokens, 4);
  EXPECT_EQ(a.decode_tokens, 10);  // 5 steps x 2 sequences
  // Greedy generation continues exactly as a prefill of prompt + generated tokens would predict.
  std::vector<int32_t> full = prompts[0];
  full.insert(full.end(), a.tokens[0].begin(), a.tokens[0].end() - 1);
  const std::vector<float> l = logits_in_pieces(m, full, {int64_t(full.size())});
  const int64_t V = m.config().vocab_size;
  for (size_t i = 0; i < a.tokens[0].size(); ++i) {
    const float* row = l.data() + (int64_t(prompts[0].size()) - 1 + int64_t(i)) * V;
    EXPECT_EQ(a.tokens[0][i], int32_t(std::max_element(row, row + V) - row)) << "token " << i;
  }
  // A stop token ends its sequence (included); the other runs on.
  g.stop_tokens = {a.tokens[1][2]};
  const GenerateResult b = generate(m, prompts, g);
  EXPECT_EQ(b.tokens[1], std::vector<int32_t>(a.tokens[1].begin(), a.tokens[1].begin() + 3));
  EXPECT_EQ(b.finish[1], FinishReason::stop);
  // Seeded sampling is reproducible and differs across seeds.
  g.stop_tokens.clear();
  g.sampling = {1.0f, 0, 1.f, 42};
  const GenerateResult s1 = generate(m, prompts, g), s2 = generate(m, prompts, g);
  EXPECT_EQ(s1.tokens, s2.tokens);
  g.sampling.seed = 43;
  EXPECT_NE(generate(m, prompts, g).tokens, s1.tokens);
}

TEST_P(ModelTest, CacheReserveKeepsEverySlotsRows) {
  const Model& m = *tiny(GetParam());
  const int64_t V = m.config().vocab_size, layers = m.config().num_hidden_layers;
  const std::vector<int32_t> a = random_tokens(7, 11, V), b = random_tokens(3, 12, V);
  std::vector<int32_t> packed = a;
  packed.insert(packed.end(), b.begin(), b.end());
  const int64_t cu[3] = {0, 7, 10}, slots[2] = {2, 0};
  // The same prefill into a cache of 8 tokens per slot that then grows, and into one of 24 from the start.
  Cache grown(m.config(), 3, 8), big(m.config(), 3, 24);
  forward(m, grown, {packed, cu, slots});
  forward(m, big, {packed, cu, slots});
  grown.reserve(4);  // smaller: nothing changes
  EXPECT_EQ(grown.max_len(), 8);
  grown.reserve(24);
  EXPECT_EQ(grown.max_len(), 24);
  EXPECT_EQ(grown.bytes(), big.bytes());
  EXPECT_EQ(grown.length(2), 7);
  EXPECT_EQ(grown.length(0), 3);
  for (int64_t s : {0, 2}) EXPECT_EQ(slot_bytes(grown, layers, s), slot_bytes(big, layers, s)) << "slot " << s;
  // Decoding on past the old max_len gives the logits of the cache that had room from the start.
  for (int step = 0; step < 12; ++step) {
    const int32_t next[2] = {int32_t(step + 1), int32_t(step + 2)};
    const int64_t cu1[3] = {0, 1, 2};
    const Tensor lg = forward(m, grown, {next, cu1, slots}), lb = forward(m, big, {next, cu1, slots});
    ASSERT_EQ(0, std::memcmp(lg.data(), lb.data(), lg.nbytes())) << GetParam() << " step " << step;
  }
  EXPECT_EQ(grown.length(2), 19);
}

TEST_P(ModelTest, GenerateGrowsTheCacheAndMatchesOnePrefill) {
  const Model& m = *tiny(GetParam());
  // 3 + 260 tokens: the cache starts with room for 3 + 256 and grows once, at the last decode step.
  const std::vector<std::vector<int32_t>> prompts = {{1, 2, 3}};
  GenerateOptions g;
  g.max_new_tokens = 260;
  const GenerateResult r = generate(m, prompts, g);
  ASSERT_EQ(r.tokens[0].size(), 260u);
  EXPECT_EQ(r.cache_bytes, Cache::bytes_for(m.config(), 1, 263));  // grown to prompt + max_new_tokens, not doubled
  std::vector<int32_t> full = prompts[0];
  full.insert(full.end(), r.tokens[0].begin(), r.tokens[0].end() - 1);
  const std::vector<float> l = logits_in_pieces(m, full, {int64_t(full.size())});
  const int64_t V = m.config().vocab_size;
  for (size_t i = 0; i < r.tokens[0].size(); ++i) {
    const float* row = l.data() + (int64_t(prompts[0].size()) - 1 + int64_t(i)) * V;
    ASSERT_EQ(r.tokens[0][i], int32_t(std::max_element(row, row + V) - row)) << GetParam() << " token " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, ModelTest, ::testing::Values("k3-tiny", "kimi-linear-tiny"),
                         [](const auto& info) { return info.param == "k3-tiny" ? "K3" : "KimiLinear"; });

TEST(Model, AFailedForwardEmptiesItsSlotsAndAResetSlotIsFresh) {
  const Model& m = *tiny("k3-tiny");
  const int64_t L = m.config().num_hidden_layers;
  const std::vector<int32_t> a = random_tokens(12, 21, 512), b = random_tokens(7, 22, 512);
  const int64_t cu_a[2] = {0, 12}, cu_b[2] = {0, 7}, slot0[1] = {0}, slot1[1] = {1};
  Cache fresh(m.config(), 2, 32), cache(m.config(), 2, 32);
  const Tensor want = forward(m, fresh, {a, cu_a, slot0});
  // slot 1 holds another sequence throughout; slot 0 fails in layer 3
  forward(m, cache, {b, cu_b, slot1});
  const std::vector<uint8_t> before = cache_bytes(cache, L, 1);
  ForwardOptions boom;
  boom.on_layer = [](int64_t layer, TensorView) {
    if (layer == 3) throw Error("callback failed at layer 3");
  };
  EXPECT_KIMI_ERROR(forward(m, cache, {a, cu_a, slot0}, boom), "callback failed at layer 3");
  EXPECT_EQ(cache.length(0), 0);
  EXPECT_EQ(cache.length(1), 7);
  EXPECT_EQ(cache_bytes(cache, L, 1), before);  // slot 0's state emptied (zeros, as before), slot 1 untouched
  const Tensor retry = forward(m, cache, {a, cu_a, slot0});
  EXPECT_EQ(std::memcmp(retry.data(), want.data(), want.nbytes()), 0);
  // reset then reuse equals a fresh cache
  cache.reset(0);
  const Tensor again = forward(m, cache, {a, cu_a, slot0});
  EXPECT_EQ(std::memcmp(again.data(), want.data(), want.nbytes()), 0);
}

// The cross-device path of the runtime without a GPU: blocks alternate between the host and a second host
// "device" Device{cpu, 1} (host memory, the CPU backend, but a different device to every check), so every
// block boundary is a copy, every weight of a cpu:1 block a copy, every cpu:1 layer's cache pools separate.
// The same kernels run on the same values: the logits must be bit-identical to the all-CPU model's, for
// prefill, decode steps and a varlen batch, and a missed copy (a stale activation) would show.
TEST(Model, BlocksOnASecondHostDeviceGiveBitIdenticalLogits) {
  const Device other{DeviceType::cpu, 1};
  for (const char* name : {"k3-tiny", "kimi-linear-tiny"}) {
    const Model& ref = *tiny(name);
    for (int phase = 0; phase < 2; ++phase) {
      // most consecutive blocks on different devices, the mixers alternating layer by layer
      const Placement p = place_blocks(ref.config(), other, [&](BlockKind, int64_t layer, size_t ordinal) {
        return (ordinal + size_t(layer + 1)) % 2 == size_t(phase) ? other : Device::cpu();
      });
      const Model m(testutil::tiny_dir(name), p);
      EXPECT_GT(m.device_weight_bytes(), 0u);
      Cache probe(m, 1, 1);
      for (int64_t i = 0; i < m.config().num_hidden_layers; ++i) EXPECT_EQ(probe.device(i), p.layers[size_t(i)].mixer);
      const std::vector<int32_t> tokens = random_tokens(70, 3, m.config().vocab_size);
      for (const std::vector<int64_t>& pieces : std::vector<std::vector<int64_t>>{{70}, {66, 1, 1, 1, 1}, {13, 40, 17}})
        EXPECT_EQ(logits_in_pieces(m, tokens, pieces), logits_in_pieces(ref, tokens, pieces))
            << name << " phase " << phase << " pieces of " << pieces[0] << " [" << p.summary() << "]";
      // a varlen batch in scattered slots, per-layer traces on the host
      const std::vector<int32_t> packed = random_tokens(40, 5, m.config().vocab_size);
      const int64_t cu[4] = {0, 9, 10, 40}, slots[3] = {2, 0, 1};
      Cache a(m, 3, 40), b(ref, 3, 40);
      std::vector<std::vector<float>> ha, hb;
      ForwardOptions oa, ob;
      oa.on_layer = [&](int64_t, TensorView h) {
        EXPECT_EQ(h.device, Device::cpu());
        ha.emplace_back(static_cast<const float*>(h.data), static_cast<const float*>(h.data) + h.numel());
      };
      ob.on_layer = [&](int64_t, TensorView h) {
        hb.emplace_back(static_cast<const float*>(h.data), static_cast<const float*>(h.data) + h.numel());
      };
      const Tensor la = forward(m, a, {packed, cu, slots}, oa), lb = forward(ref, b, {packed, cu, slots}, ob);
      EXPECT_EQ(la.device(), Device::cpu());
      ASSERT_EQ(la.nbytes(), lb.nbytes());
      EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.nbytes()), 0) << name << " phase " << phase << " varlen batch";
      EXPECT_EQ(ha, hb) << name << " phase " << phase << " per-layer hidden states";
      // a cache built for the all-host placement is refused, naming the layer and both devices
      Cache wrong(ref, 1, 8);
      const int32_t tok[1] = {1};
      const int64_t cu1[2] = {0, 1}, s0[1] = {0};
      int64_t bad = 0;
      while (p.layers[size_t(bad)].mixer == Device::cpu()) ASSERT_LT(++bad, m.config().num_hidden_layers);
      const std::string want = "layer " + std::to_string(bad) + "'s pools on cpu:1";
      EXPECT_KIMI_ERROR(forward(m, wrong, {tok, cu1, s0}), "forward", "'cache'", want.c_str(), "got cpu");
    }
  }
}

// place_weights stacks a MoE layer's routed experts: per projection (and per MXFP4 part) one allocation, expert e
// at base + e * (bytes of one expert), each slice holding that expert's checkpoint bytes. The CUDA MoE finds
// experts this way (one launch for all of them, capturable in a CUDA graph); the cpu:1 device runs the same
// upload code without a GPU.
TEST(Model, PlacedExpertsAreStackedOnePerProjection) {
  const Device other{DeviceType::cpu, 1};
  for (const char* name : {"k3-tiny", "kimi-linear-tiny"}) {
    const Model& ref = *tiny(name);
    const Placement p = place_blocks(ref.config(), other, [&](BlockKind, int64_t, size_t) { return other; });
    const Model m(testutil::tiny_dir(name), p);
    int64_t moe_layers = 0;
    for (int64_t i = 0; i < m.config().num_hidden_layers; ++i) {
      const FfnWeights& f = m.weights().layers[size_t(i)].ffn;
      const FfnWeights& r = ref.weights().layers[size_t(i)].ffn;
      if (!f.moe) continue;
      ++moe_layers;
      ASSERT_EQ(f.experts.size(), size_t(m.config().num_experts));
      for (Weight MlpWeights::*proj : {&MlpWeights::gate, &MlpWeights::up, &MlpWeights::down})
        for (TensorView Weight::*part : {&Weight::w, &Weight::scale}) {
          const TensorView first = f.experts[0].*proj.*part;
          if (!first.present()) continue;  // dense experts: no scale
          const size_t bytes = size_t(first.numel()) * first.element_size();
          for (size_t e = 0; e < f.experts.size(); ++e) {
            const TensorView v = f.experts[e].*proj.*part, src = r.experts[e].*proj.*part;
            EXPECT_EQ(v.device, other);
            EXPECT_EQ(static_cast<const char*>(v.data), static_cast<const char*>(first.data) + e * bytes)
                << name << " layer " << i << " expert " << e;
            ASSERT_EQ(v.numel(), src.numel());
            EXPECT_EQ(std::memcmp(v.data, src.data, bytes), 0) << name << " layer " << i << " expert " << e;
          }
          // one allocation: a device copy holds all E experts
          bool one = false;
          for (const Tensor& t : m.weights().device_copies)
            one = one || (t.data() == first.data && t.nbytes() == bytes * f.experts.size());
          EXPECT_TRUE(one) << name << " layer " << i;
        }
    }
    EXPECT_GT(moe_layers, 0) << name;
  }
}

TEST(Model, RejectsBadBatches) {
  const Model& m = *tiny("kimi-linear-tiny");
  Cache cache(m.config(), 2, 8);
  const int32_t warm[2] = {5, 6};
  const int64_t cu_warm[2] = {0, 2}, slot_warm[1] = {1};
  forward(m, cache, {warm, cu_warm, slot_warm});  // slot 1 holds state: bad calls must leave it intact
  const std::vector<uint8_t> before = cache_bytes(cache, m.config().num_hidden_layers);
  const int32_t tok[3] = {1, 2, 3}, bad_tok[2] = {1, 512};
  const int64_t cu[3] = {0, 2, 3}, s01[2] = {0, 1}, s00[2] = {0, 0}, s02[2] = {0, 2};
  EXPECT_KIMI_ERROR(forward(m, cache, {std::span(bad_tok), std::span(cu, 2), std::span(s01, 1)}), "'batch.tokens'",
                    "[0, vocab_size = 512)", "tokens[1] = 512");
  EXPECT_KIMI_ERROR(forward(m, cache, {tok, cu, s00}), "'batch.slots'", "distinct", "batch.slots[0] = batch.slots[1] = 0");
  EXPECT_KIMI_ERROR(forward(m, cache, {tok, cu, s02}), "'batch.slots'", "[0, 2)", "batch.slots[1] = 2");
  EXPECT_KIMI_ERROR(forward(m, cache, {tok, cu, std::span(s01, 1)}), "'batch.slots'", "2 slots", "1");
  const int64_t empty[3] = {0, 0, 3};
  EXPECT_KIMI_ERROR(forward(m, cache, {tok, empty, s01}), "'batch.cu_seqlens'", ">= 1 token", "sequence 0 has 0");
  const int64_t short_cu[3] = {0, 1, 2};
  EXPECT_KIMI_ERROR(forward(m, cache, {tok, short_cu, s01}), "'batch.cu_seqlens'", "last offset = total tokens 3", "2");
  EXPECT_EQ(cache.length(0), 0);
  EXPECT_EQ(cache.length(1), 2);
  // Room: 8 tokens per slot.
  const std::vector<int32_t> nine(9, 1);
  const int64_t cu9[2] = {0, 9};
  EXPECT_KIMI_ERROR(forward(m, cache, {nine, cu9, std::span(s01, 1)}), "max_len = 8", "slot 0 would hold 0 + 9");
  EXPECT_EQ(cache_bytes(cache, m.config().num_hidden_layers), before);
  // A cache built for another config is refused.
  Config other = m.config();
  other.kda_num_heads = 2;
  Cache wrong(other, 2, 8);
  EXPECT_KIMI_ERROR(forward(m, wrong, {tok, cu, s01}), "'cache'", "built for this model's config", "other kinds or sizes");
  EXPECT_KIMI_ERROR(cache.layer(9), "layer", "[0, 9)", "9");
  EXPECT_KIMI_ERROR(Cache(m.config(), 0, 8), "max_seqs", ">= 1", "0");
  EXPECT_KIMI_ERROR(generate(m, std::vector<std::vector<int32_t>>{{}}, {}), "prompts[0]", ">= 1 token");
}

TEST(Model, CacheLargerThanMemoryIsRefusedBeforeAllocating) {
  const Model& m = *tiny("kimi-linear-tiny");
  const int64_t huge = int64_t(1) << 40;  // 2^40 tokens x 3 MLA layers x 80 floats: 1.05e15 bytes
  const std::string need = std::to_string(Cache::bytes_for(m.config(), 1, huge)) + " bytes";
  EXPECT_KIMI_ERROR(Cache(m.config(), 1, huge), "Cache: 1 sequence x 1099511627776 tokens needs", need.c_str(),
                    "of host memory;", "available");
  Cache cache(m.config(), 2, 8);
  const size_t before = cache.bytes();
  EXPECT_KIMI_ERROR(cache.reserve(huge), "Cache: growing to 2 sequences x 1099511627776 tokens needs",
                    "of it new host memory;", "available");
  EXPECT_EQ(cache.max_len(), 8);
  EXPECT_EQ(cache.bytes(), before);
}

TEST(Model, GenerateRejectsBadOptionsByField) {
  const Model& m = *tiny("kimi-linear-tiny");
  const std::vector<std::vector<int32_t>> prompts = {{1, 2}, {3, 4, 5}};
  const int64_t limit = context_limit(m.config());
  EXPECT_EQ(limit, 1048576);
  GenerateOptions g;
  for (int64_t bad : {int64_t(0), limit - 2, int64_t(100000000), int64_t(1) << 31}) {
    const std::string got = "got " + std::to_string(bad);
    EXPECT_KIMI_ERROR(generate(m, prompts, {bad, {}, {}}), "generate: max_new_tokens: expected a value in [1, 1048573]",
                      "context limit of 1048576 tokens less the longest prompt, 3", got.c_str());
  }
  EXPECT_KIMI_ERROR(generate(m, prompts, {4, {7, 512}, {}}), "generate: stop_tokens[1]",
                    "expected a token id in [0, vocab_size = 512)", "got 512");
  EXPECT_KIMI_ERROR(generate(m, prompts, {4, {-1}, {}}), "generate: stop_tokens[0]", "got -1");
  EXPECT_KIMI_ERROR(generate(m, std::vector<std::vector<int32_t>>{{1}, {2, 600}}, g), "generate: prompts[1][1]",
                    "expected a token id in [0, vocab_size = 512)", "got 600");
  EXPECT_KIMI_ERROR(generate(m, std::vector<std::vector<int32_t>>{std::vector<int32_t>(size_t(limit), 1)}, g),
                    "generate: prompts", "fewer than the context limit of 1048576", "got 1048576");
}

}  // namespace
}  // namespace kimi::model
