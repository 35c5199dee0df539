// text/tokenizer.cpp: loading, encoding and decoding (tokenizer.h).
#include "text/tokenizer.h"

#include <algorithm>

#include "kimi/error.h"
#include "model/loader_io.h"
#include "text/pretokenize.h"
#include "text/unicode_table.h"
#include "text/utf8.h"

namespace kimi::text {

Tokenizer Tokenizer::load(const std::string& dir) {
  model::require_directory(dir, "tokenizer: ", "a checkpoint with tiktoken.model and tokenizer_config.json");
  const std::string base = dir.empty() || dir.back() == '/' ? dir : dir + "/";
  Ranks ranks;
  std::vector<std::string> by_rank;
  load_tiktoken_model(base + "tiktoken.model", ranks, by_rank);
  auto specials = load_special_tokens(base + "tokenizer_config.json", uint32_t(by_rank.size()));
  return Tokenizer(std::move(by_rank), std::move(specials));
}

Tokenizer::Tokenizer(std::vector<std::string> by_rank, std::vector<SpecialToken> specials)
    : by_id_(std::move(by_rank)), num_base_(uint32_t(by_id_.size())), specials_(std::move(specials)) {
  for (uint32_t r = 0; r < num_base_; ++r) {
    if (!ranks_.emplace(by_id_[r], r).second)
      throw Error("tokenizer: rank " + std::to_string(r) + ": token " + model::quote(by_id_[r]) + " appears twice");
  }
  for (int b = 0; b < 256; ++b)
    if (!ranks_.count(std::string(1, char(b))))
      throw Error("tokenizer: expected every single byte to be a token, got none for byte " +
                  model::quote(std::string(1, char(b))));
  pair_ranks_ = pair_ranks(ranks_);
  std::sort(specials_.begin(), specials_.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  for (size_t k = 0; k < specials_.size(); ++k) {
    const SpecialToken& s = specials_[k];
    if (s.id != num_base_ + k)
      throw Error("tokenizer: special token " + model::quote(s.text) + ": expected id " +
                  std::to_string(num_base_ + k) + ", got " + std::to_string(s.id));
    if (s.text.empty()) throw Error("tokenizer: special token " + std::to_string(s.id) + ": expected a name, got ''");
    if (!special_ids_.emplace(s.text, s.id).second)
      throw Error("tokenizer: special token " + model::quote(s.text) + " names two ids");
    by_id_.push_back(s.text);
  }
}

std::optional<uint32_t> Tokenizer::special_id(std::string_view text) const {
  auto it = special_ids_.find(text);
  if (it == special_ids_.end()) return std::nullopt;
  return it->second;
}

const std::string& Tokenizer::token_bytes(uint32_t id) const {
  if (id >= by_id_.size())
    throw Error("decode: argument 'ids': expected ids below " + std::to_string(by_id_.size()) + ", got " +
                std::to_string(id));
  return by_id_[id];
}

std::string Tokenizer::decode(std::span<const uint32_t> ids) const {
  std::string out;
  for (size_t k = 0; k < ids.size(); ++k) {
    if (ids[k] >= by_id_.size())
      throw Error("decode: argument 'ids': expected ids below " + std::to_string(by_id_.size()) + ", got " +
                  std::to_string(ids[k]) + " at position " + std::to_string(k));
    out += by_id_[ids[k]];
  }
  return out;
}

std::vector<size_t> split_long_runs(const uint8_t* flags, size_t begin, size_t end, size_t max_run) {
  std::vector<size_t> cuts;
  if (begin == end) return {end};
  bool run_is_space = flags[begin] & kPySpace;
  size_t run = 0;
  for (size_t i = begin; i < end; ++i) {
    const bool space = flags[i] & kPySpace;
    if (space != run_is_space) {
      run = 1;
      run_is_space = space;
    } else if (++run > max_run) {
      cuts.push_back(i);
      run = 1;
    }
  }
  cuts.push_back(end);
  return cuts;
}

std::vector<uint32_t> Tokenizer::encode(std::string_view text, const AllowedSpecials& allowed) const {
  std::vector<Special> allow;
  if (allowed.is_all()) {
    for (const SpecialToken& s : specials_) allow.push_back({s.text, s.id});
  } else {
    for (const std::string& name : allowed.names()) {
      auto id = special_id(name);
      if (!id)
        throw Error("encode: argument 'allowed_specials': expected special tokens of this tokenizer, got " +
                    model::quote(name));
      allow.push_back({special_ids_.find(name)->first, *id});
    }
  }
  // Longest first, so that at one position the longest allowed special is taken.
  std::sort(allow.begin(), allow.end(), [](const Special& a, const Special& b) {
    return a.text.size() != b.text.size() ? a.text.size() > b.text.size() : a.text < b.text;
  });

  Decoded d = decode_utf8(text, "encode: argument 'text'");
  std::vector<uint8_t> flags(d.cps.size());
  for (size_t i = 0; i < d.cps.size(); ++i) flags[i] = char_flags(d.cps[i]);
  std::vector<uint32_t> out;
  out.reserve(text.size() / 3 + 1);
  const size_t n = d.cps.size();
  for (size_t c0 = 0; c0 < n; c0 += kMaxEncodeChars) {
    const size_t c1 = std::min(n, c0 + kMaxEncodeChars);
    size_t begin = c0;
    for (size_t cut : split_long_runs(flags.data(), c0, c1, kMaxConsecutiveRun)) {
      encode_part(text, d.offsets, d.cps, flags, begin, cut, allow, out);
      begin = cut;
    }
  }
  return out;
}

void Tokenizer::encode_part(std::string_view text, const std::vector<size_t>& offsets,
                            const std::vector<uint32_t>& cps, const std::vector<uint8_t>& flags, size_t begin,
                            size_t end, const std::vector<Special>& allowed, std::vector<uint32_t>& out) const {
  const std::string_view part = text.substr(offsets[begin], offsets[end] - offsets[begin]);
  size_t at = begin;  // scalar value where the ordinary text starts
  if (!allowed.empty()) {
    bool first_byte[256] = {};
    for (const Special& s : allowed) first_byte[uint8_t(s.text[0])] = true;
    for (size_t b = 0; b < part.size(); ++b) {
      if (!first_byte[uint8_t(part[b])]) continue;
      const Special* hit = nullptr;
      for (const Special& s : allowed)
        if (part[b] == s.text[0] && part.substr(b).starts_with(s.text)) {
          hit = &s;
          break;
        }
      if (!hit) continue;
      // A special token is valid UTF-8, so its match starts and ends on scalar value boundaries.
      const size_t s0 = size_t(std::lower_bound(offsets.begin() + begin, offsets.begin() + end, offsets[begin] + b) -
                               offsets.begin());
      const size_t s1 = size_t(std::lower_bound(offsets.begin() + s0, offsets.begin() + end + 1,
                                                offsets[begin] + b + hit->text.size()) -
                               offsets.begin());
      encode_ordinary(text, offsets, cps, flags, at, s0, out);
      out.push_back(hit->id);
      at = s1;
      b += hit->text.size() - 1;
    }
  }
  encode_ordinary(text, offsets, cps, flags, at, end, out);
}

void Tokenizer::encode_ordinary(std::string_view text, const std::vector<size_t>& offsets,
                                const std::vector<uint32_t>& cps, const std::vector<uint8_t>& flags, size_t begin,
                                size_t end, std::vector<uint32_t>& out) const {
  std::vector<Piece> pieces;
  pretokenize(cps.data(), flags.data(), begin, end, pieces);
  for (const Piece& p : pieces)
    byte_pair_encode(text.substr(offsets[p.begin], offsets[p.end] - offsets[p.begin]), ranks_, out,
                     pair_ranks_.data());
}

}  // namespace kimi::text
