// tests/test_serve_engine.cpp: the scheduler's packing (serve/scheduler.h) and the engine (serve/engine.h) on the
// kimi-linear-tiny random model: tokens equal to generate()'s, requests independent of their batch, seeded
// reproducibility, the queue bound, cancellation, stop tokens and lengths, the metrics.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "expect_error.h"
#include "kimi/model/generate.h"
#include "model_testutil.h"
#include "serve/engine.h"
#include "serve/scheduler.h"
#include "serve_testutil.h"

namespace kimi::serve {
namespace {

using namespace std::chrono_literals;

using testutil::collect;
using testutil::greedy;
using testutil::show;

TEST(ServeScheduler, DecodesFirstThenPrefillPiecesUnderTheBudget) {
  // seq 0 prefilling 300 tokens from 0, seq 1 decoding, seq 2 prefilling its last 10, seq 3 decoding.
  const std::vector<SeqProgress> s = {{300, 0}, {5, 5}, {40, 30}, {7, 7}};
  // 2 decodes + 256 aligned tokens of seq 0 (not finishing it) + seq 2's 10 would exceed: 2 + 256 = 258 < 300 budget,
  // the 42 left: seq 0 took min(300, 298) = 298 cut back to 256 (the 64-grid); seq 2 gets its 10, both sampled first.
  EXPECT_EQ(show(pack_step(s, 300, 64)), "1d* 3d* 2:30+10* 0:0+256 | 268 tokens, 3 sampled");
  // No alignment: seq 0 takes everything left.
  EXPECT_EQ(show(pack_step(s, 300, 1)), "1d* 3d* 0:0+298 | 300 tokens, 2 sampled");
  // A budget below one grid step still makes progress (unaligned).
  EXPECT_EQ(show(pack_step(s, 40, 64)), "1d* 3d* 0:0+38 | 40 tokens, 2 sampled");
  // Decodes only fill the budget: nothing left for prefill.
  EXPECT_EQ(show(pack_step(s, 2, 64)), "1d* 3d* | 2 tokens, 2 sampled");
  // A prefill that continues from the middle of the grid ends on it.
  const std::vector<SeqProgress> mid = {{500, 100}};
  EXPECT_EQ(show(pack_step(mid, 100, 64)), "0:100+92 | 92 tokens, 0 sampled");
  EXPECT_EQ(show(pack_step(mid, 400, 64)), "0:100+400* | 400 tokens, 1 sampled");
  EXPECT_EQ(show(pack_step({}, 16, 64)), " | 0 tokens, 0 sampled");
}

struct Tiny {
  model::Model m{model::testutil::tiny_dir("kimi-linear-tiny")};
};

TEST(ServeEngine, GreedyTokensEqualGenerateAloneAndUnderLoad) {
  Tiny t;
  const std::vector<int32_t> prompt = model::testutil::random_tokens(70, 5, 512);
  model::GenerateOptions go;
  go.max_new_tokens = 12;
  const std::vector<std::vector<int32_t>> prompts = {prompt};
  const std::vector<int32_t> expected = model::generate(t.m, prompts, go).tokens[0];

  EngineOptions o;
  o.slots = 4, o.ctx_size = 256, o.max_batch_tokens = 48;  // the 70-token prompt takes two steps (pieces 64 + 6)
  Engine e(t.m, o);
  EXPECT_EQ(collect(*e.submit(greedy(prompt, 12))), expected);
  // Under load: 9 other requests (more than the slots) of other lengths, submitted around it.
  std::vector<std::shared_ptr<RequestHandle>> others;
  for (int i = 0; i < 5; ++i) others.push_back(e.submit(greedy(model::testutil::random_tokens(3 + 17 * i, 100 + i, 512), 9)));
  auto h = e.submit(greedy(prompt, 12));
  for (int i = 5; i < 9; ++i) others.push_back(e.submit(greedy(model::testutil::random_tokens(3 + 17 * i, 100 + i, 512), 9)));
  EXPECT_EQ(collect(*h), expected);
  for (auto& o2 : others) {
    Finish f = Finish::none;
    EXPECT_EQ(collect(*o2, &f).size(), 9u);
    EXPECT_EQ(f, Finish::length);
  }
}

TEST(ServeEngine, SeededSamplingIsReproducibleAndStopsAtStopTokens) {
  Tiny t;
  EngineOptions o;
  o.slots = 2, o.ctx_size = 128, o.max_batch_tokens = 64;
  Engine e(t.m, o);
  GenerationRequest r = greedy({1, 2, 3, 4}, 20);
  r.temperature = 1.f, r.top_k = 50, r.top_p = 0.9f, r.seed = 1234;
  const std::vector<int32_t> a = collect(*e.submit(r));
  auto busy = e.submit(greedy({9, 9, 9}, 30));  // another request beside the second run
  const std::vector<int32_t> b = collect(*e.submit(r));
  collect(*busy);
  EXPECT_EQ(a, b);
  r.seed = 1235;
  EXPECT_NE(collect(*e.submit(r)), a);
  // A stop token ends the request after it (delivered).
  GenerationRequest s = greedy({1, 2, 3, 4}, 20);
  s.temperature = 1.f, s.seed = 1234, s.top_k = 50, s.top_p = 0.9f;
  s.stop_tokens = {a[5]};
  Finish f = Finish::none;
  const std::vector<int32_t> c = collect(*e.submit(s), &f);
  EXPECT_EQ(f, Finish::stop);
  ASSERT_LE(c.size(), 6u);
  EXPECT_EQ(c.back(), a[5]);
  EXPECT_EQ(c, std::vector<int32_t>(a.begin(), a.begin() + int64_t(c.size())));
  // ends_after: the caller's condition (stop strings), seen on the step thread.
  GenerationRequest g = greedy({1, 2, 3, 4}, 20);
  int seen = 0;
  g.ends_after = [&](int32_t) { return ++seen == 3; };
  EXPECT_EQ(collect(*e.submit(g), &f).size(), 3u);
  EXPECT_EQ(f, Finish::stop);
}

TEST(ServeEngine, QueueBoundCancellationAndMetricsAddUp) {
  Tiny t;
  EngineOptions o;
  o.slots = 1, o.ctx_size = 600, o.max_batch_tokens = 16, o.max_queue = 2;
  Engine e(t.m, o);
  auto running = e.submit(greedy({1, 2, 3}, 500));  // holds the one slot
  while (running->wait(10ms).tokens.empty()) {
  }
  auto q1 = e.submit(greedy({4, 5}, 3));
  auto q2 = e.submit(greedy({6, 7, 8}, 3));
  EXPECT_KIMI_ERROR(e.submit(greedy({1}, 3)), "serve: the queue is full (2 requests waiting for a slot); retry later");
  q1->cancel();      // cancelled while waiting: leaves the queue
  running->cancel();  // cancelled while running: frees the slot for q2
  Finish f1 = Finish::none, f2 = Finish::none, f0 = Finish::none;
  collect(*running, &f0);
  EXPECT_EQ(collect(*q1, &f1).size(), 0u);
  EXPECT_EQ(collect(*q2, &f2).size(), 3u);
  EXPECT_EQ(f0, Finish::cancelled);
  EXPECT_EQ(f1, Finish::cancelled);
  EXPECT_EQ(f2, Finish::length);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  std::string m;
  while (std::chrono::steady_clock::now() < deadline) {
    m = e.metrics().prometheus();
    if (m.find("kimi_requests_running 0\n") != std::string::npos) break;
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_NE(m.find("kimi_requests_running 0\n"), std::string::npos) << m;
  EXPECT_NE(m.find("kimi_requests_waiting 0\n"), std::string::npos) << m;
  EXPECT_NE(m.find("kimi_cache_slots_used 0\n"), std::string::npos) << m;
  EXPECT_NE(m.find("kimi_requests_total{finish_reason=\"cancelled\"} 2\n"), std::string::npos) << m;
  EXPECT_NE(m.find("kimi_requests_total{finish_reason=\"length\"} 1\n"), std::string::npos) << m;
  EXPECT_NE(m.find("kimi_requests_rejected_total 1\n"), std::string::npos) << m;
  EXPECT_NE(m.find("kimi_prompt_tokens_total 6\n"), std::string::npos) << m;  // q1 never ran
}

TEST(ServeEngine, TheQueueBoundCountsOnlyRequestsBeyondTheFreeSlots) {
  Tiny t;
  EngineOptions o;
  o.slots = 2, o.ctx_size = 600, o.max_batch_tokens = 16, o.max_queue = 0;
  Engine e(t.m, o);
  // Both fit a free slot, whether or not the step thread has admitted the first yet.
  auto a = e.submit(greedy({1, 2}, 500));
  auto b = e.submit(greedy({3, 4}, 500));
  while (a->wait(10ms).tokens.empty()) {
  }
  while (b->wait(10ms).tokens.empty()) {
  }
  EXPECT_KIMI_ERROR(e.submit(greedy({5}, 3)), "serve: the queue is full (0 requests waiting for a slot); retry later");
  a->cancel();
  Finish f = Finish::none;
  collect(*a, &f);
  EXPECT_EQ(f, Finish::cancelled);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  std::shared_ptr<RequestHandle> c;
  while (!c && std::chrono::steady_clock::now() < deadline) {  // the slot returns at the end of the step
    try {
      c = e.submit(greedy({5}, 3));
    } catch (const QueueFull&) {
      std::this_thread::sleep_for(1ms);
    }
  }
  ASSERT_TRUE(c);
  EXPECT_EQ(collect(*c).size(), 3u);
  b->cancel();
}

TEST(ServeEngine, RefusesBadOptionsAndRequests) {
  Tiny t;
  EngineOptions o;
  o.slots = 4, o.max_batch_tokens = 3;
  EXPECT_KIMI_ERROR(Engine(t.m, o), "serve: max_batch_tokens: expected a value in [slots = 4, 2^20]", "got 3");
  o.max_batch_tokens = 64, o.ctx_size = 1;
  EXPECT_KIMI_ERROR(Engine(t.m, o), "serve: ctx_size: expected a value in [2, 1048576]", "got 1");
  o.ctx_size = 32;
  Engine e(t.m, o);
  EXPECT_KIMI_ERROR(e.submit(greedy({}, 1)), "serve: prompt: expected at least 1 token, got 0");
  EXPECT_KIMI_ERROR(e.submit(greedy({1, 512}, 1)), "serve: prompt[1]: expected a token id in [0, 512), got 512");
  EXPECT_KIMI_ERROR(e.submit(greedy(std::vector<int32_t>(32, 1), 1)),
                    "serve: prompt: expected fewer than ctx_size = 32 tokens (room for one new token), got 32");
  EXPECT_KIMI_ERROR(e.submit(greedy({1, 2}, 31)),
                    "serve: max_tokens: expected a value in [1, 30] (ctx_size 32 less the prompt's 2 tokens), got 31");
  // A request may fill its slot to the context exactly.
  Finish f = Finish::none;
  EXPECT_EQ(collect(*e.submit(greedy({1, 2}, 30)), &f).size(), 30u);
  EXPECT_EQ(f, Finish::length);
}

}  // namespace
}  // namespace kimi::serve
