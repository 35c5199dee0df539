// Implementation of serve/prefix_cache.h.
#include "serve/prefix_cache.h"

#include <algorithm>
#include <string>

#include "kimi/error.h"

namespace kimi::serve {

namespace {
constexpr uint64_t kFnvOffset = 14695981039346656037ull, kFnvPrime = 1099511628211ull;

// Continues an FNV-1a 64 hash over the 4 little-endian bytes of each token id.
uint64_t fnv(uint64_t h, std::span<const int32_t> tokens) {
  for (int32_t t : tokens) {
    const uint32_t u = uint32_t(t);
    for (int b = 0; b < 4; ++b) h = (h ^ ((u >> (8 * b)) & 0xffu)) * kFnvPrime;
  }
  return h;
}
}  // namespace

PrefixCache::PrefixCache(size_t budget_bytes, int64_t grid) : budget_(budget_bytes), grid_(grid) {
  if (budget_bytes == 0) throw Error("PrefixCache: budget_bytes: expected > 0, got 0");
  if (grid < 1) throw Error("PrefixCache: grid: expected >= 1, got " + std::to_string(grid));
}

uint64_t PrefixCache::hash(std::span<const int32_t> tokens) { return fnv(kFnvOffset, tokens); }

PrefixCache::Lru::iterator PrefixCache::lookup(std::span<const int32_t> prefix, uint64_t key) {
  const auto [b, e] = index_.equal_range(key);
  for (auto it = b; it != e; ++it)
    if (std::ranges::equal(it->second->tokens, prefix)) return it->second;
  return lru_.end();
}

bool PrefixCache::contains(std::span<const int32_t> prefix) const {
  return const_cast<PrefixCache*>(this)->lookup(prefix, hash(prefix)) != lru_.end();
}

const model::Cache::Snapshot* PrefixCache::find(std::span<const int32_t> prompt) {
  if (lru_.empty() || prompt.size() < 2) return nullptr;
  // The prefix hashes at every multiple of the grid below the prompt's length, then the longest that is held.
  const int64_t P = int64_t(prompt.size());
  std::vector<uint64_t> keys;
  uint64_t h = kFnvOffset;
  for (int64_t n = grid_; n < P; n += grid_) {
    h = fnv(h, prompt.subspan(size_t(n - grid_), size_t(grid_)));
    keys.push_back(h);
  }
  for (int64_t i = int64_t(keys.size()) - 1; i >= 0; --i) {
    const auto it = lookup(prompt.first(size_t((i + 1) * grid_)), keys[size_t(i)]);
    if (it == lru_.end()) continue;
    lru_.splice(lru_.begin(), lru_, it);  // most recently used (iterators stay valid)
    return &it->snapshot;
  }
  return nullptr;
}

void PrefixCache::erase(Lru::iterator it) {
  const auto [b, e] = index_.equal_range(it->key);
  for (auto i = b; i != e; ++i)
    if (i->second == it) {
      index_.erase(i);
      break;
    }
  bytes_ -= it->bytes;
  lru_.erase(it);
}

bool PrefixCache::insert(std::span<const int32_t> prefix, model::Cache::Snapshot s) {
  if (s.length() != int64_t(prefix.size()) || prefix.empty() || int64_t(prefix.size()) % grid_ != 0)
    throw Error("PrefixCache: insert: expected a snapshot of the prefix's " + std::to_string(prefix.size()) +
                " tokens (a positive multiple of the grid " + std::to_string(grid_) + "), got one of " +
                std::to_string(s.length()) + " tokens");
  const uint64_t key = hash(prefix);
  if (const auto old = lookup(prefix, key); old != lru_.end()) erase(old);
  const size_t bytes = s.bytes() + prefix.size() * sizeof(int32_t);
  if (bytes > budget_) return false;
  while (bytes_ + bytes > budget_) erase(std::prev(lru_.end()));
  lru_.push_front({std::vector<int32_t>(prefix.begin(), prefix.end()), std::move(s), key, bytes});
  index_.emplace(key, lru_.begin());
  bytes_ += bytes;
  return true;
}

}  // namespace kimi::serve
