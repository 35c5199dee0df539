// text/tokenizer.h: the Kimi tokenizer (tiktoken.model + tokenizer_config.json), equal to tiktoken.
//
// encode(text, allowed) is tokenization_kimi.py's TikTokenTokenizer.encode over tiktoken:
//   1. the text, as scalar values, in chunks of 400,000 (TIKTOKEN_MAX_ENCODE_CHARS);
//   2. each chunk cut so that no part holds more than 25,000 consecutive whitespace or consecutive non-whitespace
//      characters (MAX_NO_WHITESPACES_CHARS; whitespace is Python's str.isspace());
//   3. each part through tiktoken's Encoding.encode: the allowed special tokens found in it (leftmost first) become
//      their ids, and the text between them is split by the pre-tokenizer (pretokenize.h) and each piece encoded by
//      byte-level BPE (bpe.h).
// Special tokens that are not allowed are ordinary text (tiktoken's disallowed_special=()): user text never becomes
// a special token unless the caller allows it. Where one allowed special token is a prefix of another starting at
// the same place the longer one is taken (tiktoken's choice then depends on hash order; Kimi's specials have no
// such pair).
// Token ids: ranks 0..N-1 of tiktoken.model, then the 256 specials N..N+255; vocab_size() = N + 256.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/bpe.h"
#include "text/vocab_files.h"

namespace kimi::text {

inline constexpr size_t kMaxEncodeChars = 400'000;
inline constexpr size_t kMaxConsecutiveRun = 25'000;

// Which special tokens a text may contain as tokens: none (user text), all (a chat template), or the listed ones.
class AllowedSpecials {
 public:
  static AllowedSpecials none() { return AllowedSpecials(false, {}); }
  static AllowedSpecials all() { return AllowedSpecials(true, {}); }
  static AllowedSpecials only(std::vector<std::string> names) { return AllowedSpecials(false, std::move(names)); }
  bool is_all() const { return all_; }
  const std::vector<std::string>& names() const { return names_; }

 private:
  AllowedSpecials(bool all, std::vector<std::string> names) : all_(all), names_(std::move(names)) {}
  bool all_;
  std::vector<std::string> names_;
};

class Tokenizer {
 public:
  // The tokenizer of checkpoint directory dir: dir/tiktoken.model and dir/tokenizer_config.json.
  static Tokenizer load(const std::string& dir);
  // From ranks (by_rank[r] = the bytes of rank r, ranks 0..N-1, all single bytes present) and special tokens.
  Tokenizer(std::vector<std::string> by_rank, std::vector<SpecialToken> specials);

  // Token ids of UTF-8 text (invalid UTF-8 is an error naming the byte offset). An allowed name that is not a
  // special token of this tokenizer is an error.
  std::vector<uint32_t> encode(std::string_view text, const AllowedSpecials& allowed) const;
  // The bytes of the ids, concatenated (any id below vocab_size(); others are an error naming the position).
  std::string decode(std::span<const uint32_t> ids) const;
  // The bytes of one id.
  const std::string& token_bytes(uint32_t id) const;

  uint32_t vocab_size() const { return uint32_t(by_id_.size()); }
  uint32_t num_base_tokens() const { return num_base_; }
  const std::vector<SpecialToken>& specials() const { return specials_; }
  std::optional<uint32_t> special_id(std::string_view text) const;
  bool is_special(uint32_t id) const { return id >= num_base_ && id < vocab_size(); }

 private:
  struct Special {
    std::string_view text;
    uint32_t id;
  };
  // Appends the ids of scalar values [begin, end) of one part (step 3).
  void encode_part(std::string_view text, const std::vector<size_t>& offsets, const std::vector<uint32_t>& cps,
                   const std::vector<uint8_t>& flags, size_t begin, size_t end, const std::vector<Special>& allowed,
                   std::vector<uint32_t>& out) const;
  void encode_ordinary(std::string_view text, const std::vector<size_t>& offsets, const std::vector<uint32_t>& cps,
                       const std::vector<uint8_t>& flags, size_t begin, size_t end, std::vector<uint32_t>& out) const;

  Ranks ranks_;
  std::vector<uint32_t> pair_ranks_;  // pair_ranks(ranks_) (bpe.h)
  std::vector<std::string> by_id_;  // ranks, then specials
  uint32_t num_base_ = 0;
  std::vector<SpecialToken> specials_;
  std::unordered_map<std::string, uint32_t, StringHash, std::equal_to<>> special_ids_;
};

// The cut points of tokenization_kimi.py's _split_whitespaces_or_nonwhitespaces over scalar values [begin, end)
// (step 2; flags from char_flags): each part's end, the last being `end`.
std::vector<size_t> split_long_runs(const uint8_t* flags, size_t begin, size_t end, size_t max_run);

}  // namespace kimi::text
