// text/bpe.h: byte-level rank-based BPE, as tiktoken merges.
//
// A vocabulary is a map from byte strings to ranks (tiktoken's mergeable_ranks); there is no merges file: a piece
// starts as its single bytes and repeatedly merges the adjacent pair whose concatenation has the lowest rank (the
// leftmost such pair on a tie), until no adjacent pair's concatenation is in the vocabulary. The token of each final
// part is its rank. A piece that is itself in the vocabulary is that one token without merging (tiktoken looks the
// whole piece up first).
// Two forms give the same tokens: tiktoken's loop (a scan for the lowest rank after every merge, O(n * m) for n bytes
// and m merges), used for short pieces, and a heap of (rank, start byte) with stale entries skipped, O(n log n), for
// long ones (a 25,000-character run is one piece). The heap pops the lowest rank and, among equal ranks, the lowest
// start byte, which is the scan's leftmost pair (parts keep their byte order); after a merge both forms recompute the
// same two ranks (the merged part with its left and with its right neighbour).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kimi::text {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

using Ranks = std::unordered_map<std::string, uint32_t, StringHash, std::equal_to<>>;

// The ranks of the 65536 two-byte strings (256 KiB; index byte0 * 256 + byte1; UINT32_MAX where not a token): a
// lookup of a pair of bytes, the most frequent one while merging, without hashing.
std::vector<uint32_t> pair_ranks(const Ranks& ranks);

// Appends the tokens of one pre-tokenizer piece. Every single byte of the piece must be in `ranks` (the loader
// checks that all 256 are). pairs: pair_ranks(ranks), or null (two-byte strings then go through the map too).
void byte_pair_encode(std::string_view piece, const Ranks& ranks, std::vector<uint32_t>& out,
                      const uint32_t* pairs = nullptr);

// The two forms, for tests (byte_pair_encode picks one by the piece's length; neither looks the whole piece up).
void byte_pair_merge_scan(std::string_view piece, const Ranks& ranks, std::vector<uint32_t>& out,
                          const uint32_t* pairs = nullptr);
void byte_pair_merge_heap(std::string_view piece, const Ranks& ranks, std::vector<uint32_t>& out,
                          const uint32_t* pairs = nullptr);

}  // namespace kimi::text
