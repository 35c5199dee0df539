// serve/prefix_cache.h: exact prefix caching: a memory-bounded LRU of cache-slot snapshots keyed by token prefixes.
//
// An entry is a Cache::Snapshot of a slot that had run exactly the tokens `prefix` (every KDA layer's state and conv
// caches, every MLA layer's latent rows: kimi/model/cache.h), with |prefix| a multiple of the snapshot grid G. The
// engine inserts one when a prefill reaches the largest multiple of G below its prompt's length, and at admission
// restores the longest entry that is a prefix of the new prompt and shorter than it (the prompt's last token must
// still run: its logits give the first new token). docs/serve.md ("Prefix caching") has the exactness argument.
//
// Lookup hashes the prompt's prefixes at the multiples of G (FNV-1a 64 over the token ids) and compares the stored
// tokens of every entry with that hash: a hash collision is a miss, never a wrong snapshot.
// Memory: an entry costs its snapshot's bytes plus 4 bytes per prefix token; inserting evicts the least recently
// used entries until the total is within the budget, and an entry larger than the whole budget is not kept.
// Not thread-safe: the engine's step thread owns it (the metrics carry its numbers to the HTTP threads).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "kimi/model/cache.h"

namespace kimi::serve {

class PrefixCache {
 public:
  // budget_bytes: the most memory the entries may hold (> 0); grid: G (> 0), the prefix lengths kept.
  PrefixCache(size_t budget_bytes, int64_t grid);

  // The longest entry whose tokens are a proper prefix of `prompt` (length < prompt.size()), now the most recently
  // used; nullptr when there is none.
  const model::Cache::Snapshot* find(std::span<const int32_t> prompt);
  // Whether an entry holds exactly these tokens (the engine skips the snapshot then).
  bool contains(std::span<const int32_t> prefix) const;
  // Keeps `s`, a snapshot of a slot that ran exactly `prefix` (s.length() == prefix.size(), a multiple of the grid),
  // as the most recently used entry, evicting others to stay within the budget. Replaces an entry of the same
  // tokens; keeps nothing when the entry alone exceeds the budget. Returns whether it was kept.
  bool insert(std::span<const int32_t> prefix, model::Cache::Snapshot s);

  size_t bytes() const { return bytes_; }  // held by the entries (snapshots and tokens)
  size_t entries() const { return lru_.size(); }
  size_t budget() const { return budget_; }
  int64_t grid() const { return grid_; }

  // FNV-1a 64 over the token ids of `tokens`.
  static uint64_t hash(std::span<const int32_t> tokens);

 private:
  struct Entry {
    std::vector<int32_t> tokens;
    model::Cache::Snapshot snapshot;
    uint64_t key = 0;
    size_t bytes = 0;
  };
  using Lru = std::list<Entry>;  // most recently used first
  Lru::iterator lookup(std::span<const int32_t> prefix, uint64_t key);
  void erase(Lru::iterator it);

  size_t budget_, bytes_ = 0;
  int64_t grid_;
  Lru lru_;
  std::unordered_multimap<uint64_t, Lru::iterator> index_;
};

}  // namespace kimi::serve
