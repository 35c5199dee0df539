// text/vocab_files.cpp: reading tiktoken.model and tokenizer_config.json (vocab_files.h).
#include "text/vocab_files.h"

#include <charconv>
#include <unordered_set>

#include "kimi/error.h"
#include "model/loader_io.h"

namespace kimi::text {

namespace {

using model::printable;
using model::quote;

constexpr uint64_t kMaxModelBytes = uint64_t(1) << 30;
constexpr uint64_t kMaxConfigBytes = uint64_t(64) << 20;

// Standard base64 (RFC 4648, '=' padding, length a multiple of 4), as Python's base64.b64decode accepts from a
// tiktoken.model line; false for anything else.
bool base64_decode(std::string_view in, std::string& out) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  out.clear();
  if (in.empty() || in.size() % 4 != 0) return false;
  for (size_t i = 0; i < in.size(); i += 4) {
    const bool last = i + 4 == in.size();
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = in[i + k];
      if (c == '=' && last && k >= 2) {
        v[k] = 0;
        ++pad;
      } else if (pad > 0 || (v[k] = value(c)) < 0) {
        return false;  // a character outside the alphabet, or data after padding
      }
    }
    const uint32_t w = uint32_t(v[0]) << 18 | uint32_t(v[1]) << 12 | uint32_t(v[2]) << 6 | uint32_t(v[3]);
    out += char(w >> 16);
    if (pad < 2) out += char((w >> 8) & 0xFF);
    if (pad < 1) out += char(w & 0xFF);
  }
  return true;
}

}  // namespace

void parse_tiktoken_model(const std::string& text, const std::string& path, Ranks& ranks,
                          std::vector<std::string>& by_rank) {
  ranks.clear();
  by_rank.clear();
  std::vector<size_t> line_of_rank;  // for the duplicate-rank message
  std::string bytes;
  size_t line_no = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::string_view line(text.data() + pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const std::string where = "tokenizer: " + path + ":" + std::to_string(line_no) + ": ";
    const size_t sp = line.find(' ');
    if (sp == std::string_view::npos || line.find(' ', sp + 1) != std::string_view::npos)
      throw Error(where + "expected '<base64 token> <rank>', got " + quote(line));
    const std::string_view b64 = line.substr(0, sp), rank_text = line.substr(sp + 1);
    if (!base64_decode(b64, bytes)) throw Error(where + "expected a base64 token, got " + quote(b64));
    uint32_t rank = 0;
    auto [end, ec] = std::from_chars(rank_text.data(), rank_text.data() + rank_text.size(), rank);
    if (ec != std::errc() || end != rank_text.data() + rank_text.size() || rank_text.empty())
      throw Error(where + "expected a rank (an integer in [0, 4294967295]), got " + quote(rank_text));
    if (rank >= by_rank.size()) {
      if (rank > (uint32_t(1) << 24))
        throw Error(where + "expected a rank below 16777216, got " + std::to_string(rank));
      by_rank.resize(size_t(rank) + 1);
      line_of_rank.resize(size_t(rank) + 1, 0);
    }
    if (line_of_rank[rank] != 0)
      throw Error(where + "rank " + std::to_string(rank) + " appears twice (first on line " +
                  std::to_string(line_of_rank[rank]) + ")");
    auto [it, inserted] = ranks.emplace(bytes, rank);
    if (!inserted)
      throw Error(where + "token " + quote(b64) + " appears twice (ranks " + std::to_string(it->second) + " and " +
                  std::to_string(rank) + ")");
    by_rank[rank] = bytes;
    line_of_rank[rank] = line_no;
  }
  if (ranks.empty()) throw Error("tokenizer: " + path + ": expected '<base64 token> <rank>' lines, got none");
  for (size_t r = 0; r < line_of_rank.size(); ++r)
    if (line_of_rank[r] == 0)
      throw Error("tokenizer: " + path + ": expected ranks 0.." + std::to_string(line_of_rank.size() - 1) +
                  " each once, got no rank " + std::to_string(r));
  for (int b = 0; b < 256; ++b)
    if (!ranks.count(std::string(1, char(b))))
      throw Error("tokenizer: " + path + ": expected every single byte to be a token, got none for byte " +
                  quote(std::string(1, char(b))));
}

void load_tiktoken_model(const std::string& path, Ranks& ranks, std::vector<std::string>& by_rank) {
  parse_tiktoken_model(model::read_text_file(path, "tokenizer: ", kMaxModelBytes), path, ranks, by_rank);
}

std::vector<SpecialToken> load_special_tokens(const std::string& path, uint32_t num_base_tokens) {
  const std::string where = "tokenizer: " + path + ": ";
  const nlohmann::json cfg =
      model::parse_json_strict(model::read_text_file(path, "tokenizer: ", kMaxConfigBytes), "tokenizer: " + path);
  if (!cfg.is_object()) throw Error(where + "expected a JSON object, got " + model::json_excerpt(cfg));
  std::vector<SpecialToken> specials(kNumReservedSpecialTokens);
  for (uint32_t k = 0; k < kNumReservedSpecialTokens; ++k)
    specials[k] = {"<|reserved_token_" + std::to_string(num_base_tokens + k) + "|>", num_base_tokens + k};
  auto it = cfg.find("added_tokens_decoder");
  if (it != cfg.end()) {
    if (!it->is_object())
      throw Error(where + "key 'added_tokens_decoder': expected an object, got " + model::json_excerpt(*it));
    for (const auto& [key, value] : it->items()) {
      const std::string at = where + "key 'added_tokens_decoder." + printable(key) + "': ";
      uint32_t id = 0;
      auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
      if (ec != std::errc() || end != key.data() + key.size() || key.empty())
        throw Error(at + "expected a token id, got " + quote(key));
      if (id < num_base_tokens || id - num_base_tokens >= kNumReservedSpecialTokens)
        throw Error(at + "expected a special token id in [" + std::to_string(num_base_tokens) + ", " +
                    std::to_string(num_base_tokens + kNumReservedSpecialTokens - 1) +
                    "] (after the tiktoken.model ranks), got " + std::to_string(id));
      if (!value.is_object() || !value.contains("content") || !value["content"].is_string() ||
          value["content"].get_ref<const std::string&>().empty())
        throw Error(at + "expected an object with a non-empty string 'content', got " + model::json_excerpt(value));
      specials[id - num_base_tokens].text = value["content"].get<std::string>();
    }
  }
  std::unordered_set<std::string_view> seen;
  for (const SpecialToken& s : specials)
    if (!seen.insert(s.text).second)
      throw Error(where + "special token " + quote(s.text) + " names two ids (the second is " +
                  std::to_string(s.id) + ")");
  return specials;
}

}  // namespace kimi::text
