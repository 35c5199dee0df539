// text/train_bpe.cpp: byte-level BPE training (train_bpe.h).
#include "text/train_bpe.h"

#include <cstdint>
#include <map>
#include <unordered_map>

#include "kimi/error.h"
#include "text/pretokenize.h"
#include "text/unicode_table.h"
#include "text/utf8.h"

namespace kimi::text {

namespace {

// The corpus's distinct pre-tokenizer pieces as byte strings, with how often each occurs (std::map: a fixed order).
std::map<std::string, uint64_t> count_pieces(std::string_view corpus) {
  const Decoded d = decode_utf8(corpus, "train_byte_bpe: corpus");
  std::vector<uint8_t> flags(d.cps.size());
  for (size_t i = 0; i < d.cps.size(); ++i) flags[i] = char_flags(d.cps[i]);
  std::vector<Piece> pieces;
  pretokenize(d.cps.data(), flags.data(), 0, d.cps.size(), pieces);
  std::map<std::string, uint64_t> counts;
  for (const Piece& p : pieces)
    ++counts[std::string(corpus.substr(d.offsets[p.begin], d.offsets[p.end] - d.offsets[p.begin]))];
  return counts;
}

// The next byte string of length len after s in byte order; false past the last ("\xFF...\xFF").
bool next_string(std::string& s) {
  for (size_t i = s.size(); i-- > 0;) {
    if (uint8_t(s[i]) != 0xFF) {
      s[i] = char(uint8_t(s[i]) + 1);
      return true;
    }
    s[i] = '\0';
  }
  return false;
}

}  // namespace

std::vector<std::string> train_byte_bpe(std::string_view corpus, size_t num_ranks) {
  if (num_ranks < 256)
    throw Error("train_byte_bpe: expected at least 256 ranks (the single bytes), got " + std::to_string(num_ranks));
  std::vector<std::string> by_rank;
  std::unordered_map<std::string, uint32_t> id_of;
  for (int b = 0; b < 256; ++b) {
    by_rank.emplace_back(1, char(b));
    id_of.emplace(by_rank.back(), uint32_t(b));
  }

  // Each distinct piece as token ids (its bytes at first) and its weight.
  std::vector<std::vector<uint32_t>> words;
  std::vector<uint64_t> weights;
  for (const auto& [piece, n] : count_pieces(corpus)) {
    if (piece.size() < 2) continue;  // one byte: nothing to merge
    std::vector<uint32_t> w;
    for (char c : piece) w.push_back(uint8_t(c));
    words.push_back(std::move(w));
    weights.push_back(n);
  }

  while (by_rank.size() < num_ranks) {
    std::unordered_map<uint64_t, uint64_t> pair_counts;  // key: left << 32 | right
    for (size_t k = 0; k < words.size(); ++k)
      for (size_t i = 0; i + 1 < words[k].size(); ++i)
        pair_counts[uint64_t(words[k][i]) << 32 | words[k][i + 1]] += weights[k];
    if (pair_counts.empty()) break;
    uint64_t best = 0, best_count = 0;
    for (const auto& [key, count] : pair_counts) {
      if (count < best_count) continue;
      if (count == best_count) {
        const std::string &l = by_rank[key >> 32], &r = by_rank[key & 0xFFFFFFFF];
        const std::string &bl = by_rank[best >> 32], &br = by_rank[best & 0xFFFFFFFF];
        if (l > bl || (l == bl && r >= br)) continue;
      }
      best = key;
      best_count = count;
    }
    const uint32_t left = uint32_t(best >> 32), right = uint32_t(best & 0xFFFFFFFF);
    const std::string merged = by_rank[left] + by_rank[right];
    auto [it, added] = id_of.emplace(merged, uint32_t(by_rank.size()));
    if (added) by_rank.push_back(merged);  // else: the bytes are a token already (reached by another pair)
    const uint32_t id = it->second;
    for (std::vector<uint32_t>& w : words) {
      size_t out = 0;
      for (size_t i = 0; i < w.size(); ++i) {
        if (i + 1 < w.size() && w[i] == left && w[i + 1] == right) {
          w[out++] = id;
          ++i;
        } else {
          w[out++] = w[i];
        }
      }
      w.resize(out);
    }
  }

  // Filler: byte strings that are not tokens, shortest first, in byte order.
  for (size_t len = 2; by_rank.size() < num_ranks; ++len) {
    std::string s(len, '\0');
    do {
      if (id_of.emplace(s, uint32_t(by_rank.size())).second) by_rank.push_back(s);
    } while (by_rank.size() < num_ranks && next_string(s));
  }
  return by_rank;
}

}  // namespace kimi::text
