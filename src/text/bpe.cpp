// text/bpe.cpp: tiktoken's merge loop (bpe.h).
#include "text/bpe.h"

#include <limits>
#include <queue>
#include <tuple>
#include <utility>

namespace kimi::text {

namespace {

constexpr uint32_t kNoRank = std::numeric_limits<uint32_t>::max();
// Pieces of at least this many bytes merge through the heap.
constexpr size_t kHeapFromBytes = 128;

uint32_t rank_of(const Ranks& ranks, const uint32_t* pairs, std::string_view bytes) {
  if (pairs && bytes.size() == 2) return pairs[uint8_t(bytes[0]) * 256 + uint8_t(bytes[1])];
  auto it = ranks.find(bytes);
  return it == ranks.end() ? kNoRank : it->second;
}

}  // namespace

std::vector<uint32_t> pair_ranks(const Ranks& ranks) {
  std::vector<uint32_t> pairs(65536, kNoRank);
  for (const auto& [bytes, rank] : ranks)
    if (bytes.size() == 2) pairs[uint8_t(bytes[0]) * 256 + uint8_t(bytes[1])] = rank;
  return pairs;
}

void byte_pair_encode(std::string_view piece, const Ranks& ranks, std::vector<uint32_t>& out, const uint32_t* pairs) {
  if (auto it = ranks.find(piece); it != ranks.end()) {
    out.push_back(it->second);
    return;
  }
  if (piece.size() >= kHeapFromBytes)
    byte_pair_merge_heap(piece, ranks, out, pairs);
  else
    byte_pair_merge_scan(piece, ranks, out, pairs);
}

void byte_pair_merge_scan(std::string_view piece, const Ranks& ranks, std::vector<uint32_t>& out,
                          const uint32_t* pairs) {
  const size_t n = piece.size();
  if (n == 0) return;
  // parts[k] = (start byte of part k, rank of merging part k with part k + 1); two sentinels at the end.
  std::vector<std::pair<size_t, uint32_t>> parts;
  parts.reserve(n + 1);
  for (size_t i = 0; i + 1 < n; ++i) parts.emplace_back(i, rank_of(ranks, pairs, piece.substr(i, 2)));
  parts.emplace_back(n - 1, kNoRank);
  parts.emplace_back(n, kNoRank);
  // The rank of merging part k with k + 1 once part k + 1 has absorbed part k + 2.
  auto merged_rank = [&](size_t k) {
    if (k + 3 >= parts.size()) return kNoRank;
    return rank_of(ranks, pairs, piece.substr(parts[k].first, parts[k + 3].first - parts[k].first));
  };
  for (;;) {
    uint32_t best = kNoRank;
    size_t at = 0;
    for (size_t k = 0; k + 1 < parts.size(); ++k)
      if (parts[k].second < best) best = parts[k].second, at = k;
    if (best == kNoRank) break;
    if (at > 0) parts[at - 1].second = merged_rank(at - 1);
    parts[at].second = merged_rank(at);
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
  for (size_t k = 0; k + 1 < parts.size(); ++k)
    out.push_back(ranks.find(piece.substr(parts[k].first, parts[k + 1].first - parts[k].first))->second);
}

void byte_pair_merge_heap(std::string_view piece, const Ranks& ranks, std::vector<uint32_t>& out,
                          const uint32_t* pairs) {
  const size_t n = piece.size();
  if (n == 0) return;
  // Parts as a linked list over their start bytes: part s spans [s, next[s]); prev[s] is the part before it.
  // rank[s] is the rank of part s merged with the part after it; an entry (rank, s) on the heap is stale when
  // part s is gone (alive[s] false) or its rank has changed since.
  std::vector<size_t> next(n), prev(n);
  std::vector<uint32_t> rank(n, kNoRank);
  std::vector<char> alive(n, 1);
  for (size_t i = 0; i < n; ++i) {
    next[i] = i + 1;
    prev[i] = i - 1;  // wraps for part 0, never read
  }
  using Entry = std::pair<uint32_t, size_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  auto pair_rank = [&](size_t s) {
    const size_t mid = next[s];
    if (mid >= n) return kNoRank;
    return rank_of(ranks, pairs, piece.substr(s, next[mid] - s));
  };
  for (size_t i = 0; i + 1 < n; ++i) {
    rank[i] = pair_rank(i);
    if (rank[i] != kNoRank) heap.emplace(rank[i], i);
  }
  while (!heap.empty()) {
    auto [r, s] = heap.top();
    heap.pop();
    if (!alive[s] || rank[s] != r) continue;
    const size_t gone = next[s];  // part s absorbs the part after it
    alive[gone] = 0;
    next[s] = next[gone];
    if (next[s] < n) prev[next[s]] = s;
    rank[s] = pair_rank(s);
    if (rank[s] != kNoRank) heap.emplace(rank[s], s);
    if (s > 0) {
      const size_t p = prev[s];
      rank[p] = pair_rank(p);
      if (rank[p] != kNoRank) heap.emplace(rank[p], p);
    }
  }
  for (size_t s = 0; s < n; s = next[s]) out.push_back(ranks.find(piece.substr(s, next[s] - s))->second);
}

}  // namespace kimi::text
