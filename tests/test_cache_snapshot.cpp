// tests/test_cache_snapshot.cpp: Cache::snapshot / Cache::restore (kimi/model/cache.h) on the CPU: a slot restored
// from a snapshot continues bit for bit as the snapshotted slot did (every KDA state, conv cache and MLA latent row
// comes back), on kimi-linear-tiny and k3-tiny; a bad slot, a foreign snapshot or one longer than max_len is an
// error that leaves the cache unchanged.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "expect_error.h"
#include "kimi/model/cache.h"
#include "kimi/model/model.h"
#include "model_testutil.h"

namespace kimi::model {
namespace {

// Runs `tokens` into `slot` as one sequence; returns the last token's logits.
std::vector<float> run(const Model& m, Cache& cache, int64_t slot, const std::vector<int32_t>& tokens) {
  const std::vector<int64_t> cu = {0, int64_t(tokens.size())}, slots = {slot};
  const Tensor logits = forward(m, cache, {tokens, cu, slots});
  const float* p = logits.data_as<float>();
  return std::vector<float>(p, p + logits.view().numel());
}

std::vector<int32_t> part(const std::vector<int32_t>& t, size_t begin, size_t end) {
  return std::vector<int32_t>(t.begin() + int64_t(begin), t.begin() + int64_t(end));
}

void restore_continues_bit_for_bit(const std::string& name) {
  const Model m(testutil::tiny_dir(name));
  const int64_t V = m.config().vocab_size;
  const std::vector<int32_t> t = testutil::random_tokens(100, 7, V);
  Cache cache(m, 3, 160);
  // Slot 0: 64 tokens, snapshot, then 36 more and three single tokens (the decode path).
  run(m, cache, 0, part(t, 0, 64));
  const Cache::Snapshot s = cache.snapshot(0);
  EXPECT_EQ(s.length(), 64);
  std::vector<std::vector<float>> want;
  want.push_back(run(m, cache, 0, part(t, 64, 100)));
  for (int32_t tok : {5, 9, 11}) want.push_back(run(m, cache, 0, {tok}));
  // Slot 2 held another sequence before: restore overwrites every pool of it.
  run(m, cache, 2, testutil::random_tokens(90, 8, V));
  cache.restore(2, s);
  EXPECT_EQ(cache.length(2), 64);
  std::vector<std::vector<float>> got;
  got.push_back(run(m, cache, 2, part(t, 64, 100)));
  for (int32_t tok : {5, 9, 11}) got.push_back(run(m, cache, 2, {tok}));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].size(), want[i].size());
    EXPECT_EQ(std::memcmp(got[i].data(), want[i].data(), got[i].size() * sizeof(float)), 0) << name << " step " << i;
  }
  EXPECT_EQ(cache.length(2), 103);
}

TEST(CacheSnapshot, RestoreThenContinueEqualsTheOriginalBitForBitKimiLinear) { restore_continues_bit_for_bit("kimi-linear-tiny"); }
TEST(CacheSnapshot, RestoreThenContinueEqualsTheOriginalBitForBitK3) { restore_continues_bit_for_bit("k3-tiny"); }

TEST(CacheSnapshot, BytesCountEveryLayersRowsOfTheSlot) {
  const Config c = named_config("kimi-linear-tiny");
  Cache cache(c, 2, 32);
  const Cache::Snapshot empty = cache.snapshot(1);
  EXPECT_EQ(empty.length(), 0);
  size_t kda = 0, mla_row = 0;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    if (c.is_kda_layer(i)) {
      const size_t P = size_t(c.kda_num_heads * c.kda_head_dim);
      kda += 4 * (P * size_t(c.kda_head_dim) + 3 * P * size_t(c.conv_kernel - 1));
    } else {
      mla_row += 4 * size_t(c.kv_lora_rank + c.qk_rope_head_dim);
    }
  }
  ASSERT_GT(kda, 0u);
  ASSERT_GT(mla_row, 0u);
  EXPECT_EQ(empty.bytes(), kda);  // no latent rows at length 0
  // A restored empty snapshot is an empty slot.
  cache.restore(0, empty);
  EXPECT_EQ(cache.length(0), 0);
}

TEST(CacheSnapshot, RestoreRefusesABadSlotAForeignSnapshotAndOneLongerThanMaxLen) {
  const Model m(testutil::tiny_dir("kimi-linear-tiny"));
  Cache big(m, 1, 128);
  run(m, big, 0, testutil::random_tokens(100, 3, m.config().vocab_size));
  const Cache::Snapshot s = big.snapshot(0);
  EXPECT_EQ(s.length(), 100);
  Cache small(m, 2, 64);
  EXPECT_KIMI_ERROR(small.restore(2, s), "Cache: slot: expected a value in [0, 2), got 2");
  EXPECT_KIMI_ERROR(small.snapshot(-1), "Cache: slot: expected a value in [0, 2), got -1");
  EXPECT_KIMI_ERROR(small.restore(0, s), "Cache: restore: argument 'snapshot': expected a length <= max_len 64, got 100");
  EXPECT_EQ(small.length(0), 0);  // unchanged
  Config wider = m.config();
  wider.kv_lora_rank *= 2;  // the same layers, a wider MLA latent
  Cache other(wider, 1, 128);
  EXPECT_KIMI_ERROR(other.restore(0, s), "Cache: restore: argument 'snapshot': expected a snapshot of a cache with this "
                                         "cache's", "layers of the same kinds and sizes, got one of",
                    "layers of other kinds or sizes");
  EXPECT_KIMI_ERROR(small.restore(0, Cache::Snapshot{}),
                    "Cache: restore: argument 'snapshot': expected a snapshot of a cache with this cache's",
                    "got one of 0 layers");
  // After growing, the same snapshot fits.
  small.reserve(128);
  small.restore(1, s);
  EXPECT_EQ(small.length(1), 100);
}

}  // namespace
}  // namespace kimi::model
