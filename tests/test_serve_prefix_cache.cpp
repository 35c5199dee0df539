// tests/test_serve_prefix_cache.cpp: exact prefix caching (serve/prefix_cache.h and the engine's use of it): the
// LRU's lookup (longest proper prefix, verified tokens), its memory bound, the scheduler's snapshot grid, a resumed
// prefill's logits equal to the uncached prefill's bit for bit, and the engine's greedy tokens on a hit equal to
// those of the uncached run on kimi-linear-tiny and k3-tiny: the same prompt twice, and a prompt extending a cached
// one.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "expect_error.h"
#include "kimi/model/cache.h"
#include "model_testutil.h"
#include "serve/engine.h"
#include "serve/prefix_cache.h"
#include "serve/scheduler.h"
#include "serve_testutil.h"

namespace kimi::serve {
namespace {

using namespace std::chrono_literals;

using testutil::collect;
using testutil::greedy;
using testutil::show_pieces;

TEST(ServePrefixCache, NoPrefillPieceCrossesTheSnapshotGrid) {
  // From 0 with a large budget: cut at 256; from the middle of a grid cell: up to the next multiple.
  EXPECT_EQ(show_pieces(pack_step(std::vector<SeqProgress>{{600, 0}}, 512, 64, 256)), "0:0+256");
  EXPECT_EQ(show_pieces(pack_step(std::vector<SeqProgress>{{600, 192}}, 512, 64, 256)), "0:192+64");
  EXPECT_EQ(show_pieces(pack_step(std::vector<SeqProgress>{{600, 512}}, 512, 64, 256)), "0:512+88*");
  // A budget below the grid: 64-aligned pieces that still land on every multiple of 256.
  EXPECT_EQ(show_pieces(pack_step(std::vector<SeqProgress>{{600, 0}}, 200, 64, 256)), "0:0+192");
  EXPECT_EQ(show_pieces(pack_step(std::vector<SeqProgress>{{600, 192}}, 200, 64, 256)), "0:192+64");
  // Grid 0: off (the pieces of the plain scheduler).
  EXPECT_EQ(show_pieces(pack_step(std::vector<SeqProgress>{{600, 0}}, 512, 64, 0)), "0:0+512");
}

struct Tiny {
  explicit Tiny(const std::string& name) : m(model::testutil::tiny_dir(name)) {}
  model::Model m;
};

// A snapshot of a slot that ran `tokens`.
model::Cache::Snapshot snapshot_of(const model::Model& m, const std::vector<int32_t>& tokens) {
  model::Cache c(m, 1, 64);
  const std::vector<int64_t> cu = {0, int64_t(tokens.size())}, slots = {0};
  model::forward(m, c, {tokens, cu, slots});
  return c.snapshot(0);
}

std::vector<int32_t> first(const std::vector<int32_t>& t, size_t n) { return std::vector<int32_t>(t.begin(), t.begin() + int64_t(n)); }

TEST(ServePrefixCache, FindsTheLongestProperPrefixAndEvictsTheLeastRecentlyUsed) {
  Tiny t("kimi-linear-tiny");
  const std::vector<int32_t> a = model::testutil::random_tokens(20, 1, 512);
  const size_t snap4 = snapshot_of(t.m, first(a, 4)).bytes(), snap8 = snapshot_of(t.m, first(a, 8)).bytes();
  const size_t e4 = snap4 + 16, e8 = snap8 + 32;  // an entry: its snapshot and its tokens
  PrefixCache pc(e4 + e8, 4);
  EXPECT_EQ(pc.find(a), nullptr);
  EXPECT_TRUE(pc.insert(first(a, 4), snapshot_of(t.m, first(a, 4))));
  EXPECT_TRUE(pc.insert(first(a, 8), snapshot_of(t.m, first(a, 8))));
  EXPECT_EQ(pc.entries(), 2u);
  EXPECT_EQ(pc.bytes(), e4 + e8);
  ASSERT_NE(pc.find(a), nullptr);
  EXPECT_EQ(pc.find(a)->length(), 8);                // the longest
  EXPECT_EQ(pc.find(first(a, 9))->length(), 8);
  EXPECT_EQ(pc.find(first(a, 8))->length(), 4);      // a proper prefix only: one token must still run
  EXPECT_EQ(pc.find(first(a, 4)), nullptr);
  std::vector<int32_t> b = a;
  b[6] = (b[6] + 1) % 512;                           // differs inside the second grid cell
  EXPECT_EQ(pc.find(b)->length(), 4);
  EXPECT_TRUE(pc.contains(first(a, 8)));
  EXPECT_FALSE(pc.contains(first(b, 8)));
  // find(first(a, 8)) above made the 4-token entry the most recently used: a new entry evicts the 8-token one.
  EXPECT_TRUE(pc.insert(first(b, 4 + 4), snapshot_of(t.m, first(b, 8))));
  EXPECT_EQ(pc.entries(), 2u);
  EXPECT_FALSE(pc.contains(first(a, 8)));
  EXPECT_TRUE(pc.contains(first(a, 4)));
  EXPECT_EQ(pc.find(a)->length(), 4);
  // An entry larger than the whole budget is not kept (and evicts nothing).
  PrefixCache tiny_budget(e4 - 1, 4);
  EXPECT_FALSE(tiny_budget.insert(first(a, 4), snapshot_of(t.m, first(a, 4))));
  EXPECT_EQ(tiny_budget.entries(), 0u);
  EXPECT_EQ(tiny_budget.bytes(), 0u);
  // Refusals.
  EXPECT_KIMI_ERROR(pc.insert(first(a, 5), snapshot_of(t.m, first(a, 5))),
                    "PrefixCache: insert: expected a snapshot of the prefix's 5 tokens (a positive multiple of the grid "
                    "4), got one of 5 tokens");
  EXPECT_KIMI_ERROR(pc.insert(first(a, 8), snapshot_of(t.m, first(a, 4))),
                    "PrefixCache: insert: expected a snapshot of the prefix's 8 tokens", "got one of 4 tokens");
  EXPECT_KIMI_ERROR(PrefixCache(0, 4), "PrefixCache: budget_bytes: expected > 0, got 0");
  EXPECT_KIMI_ERROR(PrefixCache(1, 0), "PrefixCache: grid: expected >= 1, got 0");
}

// The engine's prefill of `prompt` alone in `slot` from position `from` (the slot holds prompt[0, from)): the pieces
// pack_step gives, each one forward step; returns the last piece's logits. With `snap_at` > 0, *snap is the slot
// after the piece that ends there.
std::vector<float> prefill_alone(const model::Model& m, model::Cache& cache, int64_t slot,
                                 const std::vector<int32_t>& prompt, int64_t from, int64_t budget, int64_t grid,
                                 int64_t snap_at = 0, model::Cache::Snapshot* snap = nullptr) {
  const int64_t P = int64_t(prompt.size());
  std::vector<float> last;
  for (int64_t done = from; done < P;) {
    const std::vector<SeqProgress> seqs = {{P, done}};
    const StepPacking pk = pack_step(seqs, budget, 64, grid);
    const Piece& q = pk.pieces.at(0);
    const std::vector<int32_t> t(prompt.begin() + q.begin, prompt.begin() + q.begin + q.count);
    const std::vector<int64_t> cu = {0, q.count}, slots = {slot};
    const Tensor logits = model::forward(m, cache, {t, cu, slots});
    last.assign(logits.data_as<float>(), logits.data_as<float>() + logits.view().numel());
    done += q.count;
    if (done == snap_at) *snap = cache.snapshot(slot);
  }
  return last;
}

// The exactness argument of docs/serve.md, bit for bit on the logits: a prompt b extending a, prefilled from the
// snapshot a's prefill left at 128, gives the logits of b's own uncached prefill (the same pieces from 128 on).
void resumed_prefill_is_bit_exact(const std::string& name) {
  Tiny t(name);
  const int64_t V = t.m.config().vocab_size;
  const std::vector<int32_t> a = model::testutil::random_tokens(150, 41, V);
  std::vector<int32_t> b = a;
  for (int32_t x : model::testutil::random_tokens(75, 42, V)) b.push_back(x);
  for (int64_t budget : {100, 160, 512}) {
    model::Cache cache(t.m, 3, 256);
    model::Cache::Snapshot s;
    prefill_alone(t.m, cache, 0, a, 0, budget, 64, 128, &s);
    ASSERT_EQ(s.length(), 128);
    const std::vector<float> uncached = prefill_alone(t.m, cache, 1, b, 0, budget, 64);
    cache.restore(2, s);
    const std::vector<float> hit = prefill_alone(t.m, cache, 2, b, 128, budget, 64);
    ASSERT_EQ(hit.size(), uncached.size());
    EXPECT_EQ(std::memcmp(hit.data(), uncached.data(), hit.size() * sizeof(float)), 0) << name << " budget " << budget;
  }
}

TEST(ServePrefixCache, AResumedPrefillIsBitExactKimiLinear) { resumed_prefill_is_bit_exact("kimi-linear-tiny"); }
TEST(ServePrefixCache, AResumedPrefillIsBitExactK3) { resumed_prefill_is_bit_exact("k3-tiny"); }

std::vector<int32_t> greedy_run(Engine& e, const std::vector<int32_t>& prompt, int64_t n) {
  return collect(*e.submit(greedy(prompt, n)));
}

// The value of a metric line "name value" in Prometheus text.
std::string metric(const Engine& e, const std::string& name) {
  const std::string m = e.metrics().prometheus(), key = "\n" + name + " ";
  const size_t at = m.find(key);
  if (at == std::string::npos) return "absent";
  const size_t b = at + key.size();
  return m.substr(b, m.find('\n', b) - b);
}

void hits_give_the_uncached_tokens(const std::string& name) {
  Tiny t(name);
  const int64_t V = t.m.config().vocab_size;
  EngineOptions o;
  o.slots = 2, o.ctx_size = 400, o.max_batch_tokens = 100, o.prefix_grid = 64, o.prefix_cache_bytes = 64 << 20;
  const std::vector<int32_t> a = model::testutil::random_tokens(150, 21, V);
  std::vector<int32_t> b = a;  // a extended by 50 tokens
  for (int32_t x : model::testutil::random_tokens(50, 22, V)) b.push_back(x);

  // The uncached runs, each in an engine of its own (every lookup a miss).
  std::vector<int32_t> want_a, want_b;
  {
    Engine e(t.m, o);
    want_a = greedy_run(e, a, 10);
  }
  {
    Engine e(t.m, o);
    want_b = greedy_run(e, b, 10);
    EXPECT_EQ(metric(e, "kimi_prefix_cache_misses_total"), "1");
    EXPECT_EQ(metric(e, "kimi_prefix_cache_hits_total"), "0");
  }
  ASSERT_EQ(want_a.size(), 10u);
  ASSERT_EQ(want_b.size(), 10u);

  Engine e(t.m, o);
  EXPECT_EQ(greedy_run(e, a, 10), want_a);  // a miss that leaves a snapshot of a's first 128 tokens
  EXPECT_EQ(metric(e, "kimi_prefix_cache_entries"), "1");
  EXPECT_EQ(greedy_run(e, a, 10), want_a);  // a hit: 128 tokens restored, 22 run
  EXPECT_EQ(metric(e, "kimi_prefix_cache_hits_total"), "1");
  EXPECT_EQ(metric(e, "kimi_prefix_cache_tokens_reused_total"), "128");
  EXPECT_EQ(greedy_run(e, b, 10), want_b);  // extends a: resumes from a's 128 tokens, then runs [128, 192), [192, 200)
  EXPECT_EQ(metric(e, "kimi_prefix_cache_hits_total"), "2");
  EXPECT_EQ(metric(e, "kimi_prefix_cache_misses_total"), "1");
  EXPECT_EQ(metric(e, "kimi_prefix_cache_tokens_reused_total"), "256");
  EXPECT_EQ(metric(e, "kimi_prefix_cache_entries"), "2");  // b left its own at 192
  // Every prompt token ran once or was restored: 150 + 22 + 72.
  EXPECT_EQ(metric(e, "kimi_prompt_tokens_total"), "244");
  EXPECT_EQ(greedy_run(e, b, 10), want_b);  // now from b's own 192
  EXPECT_EQ(metric(e, "kimi_prefix_cache_tokens_reused_total"), "448");
  const std::string bytes = metric(e, "kimi_prefix_cache_bytes");
  EXPECT_GT(std::stoll(bytes), 0) << bytes;
}

TEST(ServePrefixCache, HitsGiveTheTokensOfTheUncachedRunKimiLinear) { hits_give_the_uncached_tokens("kimi-linear-tiny"); }
TEST(ServePrefixCache, HitsGiveTheTokensOfTheUncachedRunK3) { hits_give_the_uncached_tokens("k3-tiny"); }

TEST(ServePrefixCache, TheBudgetBoundsTheSnapshotsHeld) {
  Tiny t("kimi-linear-tiny");
  const int64_t V = t.m.config().vocab_size;
  const std::vector<int32_t> a = model::testutil::random_tokens(70, 31, V), b = model::testutil::random_tokens(70, 32, V);
  const size_t entry = snapshot_of(t.m, first(a, 64)).bytes() + 64 * 4;
  EngineOptions o;
  o.slots = 1, o.ctx_size = 128, o.max_batch_tokens = 64, o.prefix_grid = 64, o.prefix_cache_bytes = entry + entry / 2;
  Engine e(t.m, o);
  greedy_run(e, a, 2);
  greedy_run(e, b, 2);  // evicts a's
  EXPECT_EQ(metric(e, "kimi_prefix_cache_entries"), "1");
  EXPECT_EQ(metric(e, "kimi_prefix_cache_bytes"), std::to_string(entry));
  greedy_run(e, a, 2);  // a miss again
  EXPECT_EQ(metric(e, "kimi_prefix_cache_misses_total"), "3");
  greedy_run(e, a, 2);
  EXPECT_EQ(metric(e, "kimi_prefix_cache_hits_total"), "1");
}

TEST(ServePrefixCache, RefusesAGridOffTheChunkGrid) {
  Tiny t("kimi-linear-tiny");
  EngineOptions o;
  o.slots = 1, o.ctx_size = 128, o.max_batch_tokens = 64, o.prefix_grid = 100, o.prefix_cache_bytes = 1 << 20;
  EXPECT_KIMI_ERROR(Engine(t.m, o), "serve: prefix_grid: expected a positive multiple of prefill_align = 64, got 100");
}

}  // namespace
}  // namespace kimi::serve
