// tools/kimi/tokenize_cmd.cpp: `kimi tokenize` (tokenize_cmd.h). Encoding prints the ids and, with --json, each
// token's bytes; decoding prints tiktoken's decode of the ids (invalid UTF-8 as U+FFFD).
#include "kimi/tokenize_cmd.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kimi/error.h"
#include "model/loader_io.h"
#include "text/stream_decoder.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace kimi::cli {

namespace {

constexpr uint64_t kMaxTextFileBytes = uint64_t(1) << 30;

// "a,b,c" as ids; the message names --ids and the part at fault.
std::vector<uint32_t> parse_ids(const std::string& s, uint32_t vocab, const std::string& dir) {
  std::vector<uint32_t> ids;
  size_t i = 0;
  while (i <= s.size()) {
    const size_t j = std::min(s.find(',', i), s.size());
    const std::string part = s.substr(i, j - i);
    const bool digits = !part.empty() && part.size() <= 10 && part.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || std::stoull(part) >= vocab)
      throw Error("tokenize: --ids: expected comma-separated token ids in [0, " + std::to_string(vocab) +
                  ") (the vocabulary of " + dir + "), got " + model::quote(part) + " (item " +
                  std::to_string(ids.size() + 1) + ")");
    ids.push_back(uint32_t(std::stoull(part)));
    i = j + 1;
  }
  return ids;
}

text::AllowedSpecials parse_specials(const std::string& s, const text::Tokenizer& tok, const std::string& dir) {
  if (s == "none") return text::AllowedSpecials::none();
  if (s == "all") return text::AllowedSpecials::all();
  std::vector<std::string> names;
  size_t i = 0;
  while (i <= s.size()) {
    const size_t j = std::min(s.find(',', i), s.size());
    std::string name = s.substr(i, j - i);
    if (!tok.special_id(name))
      throw Error("tokenize: --specials: expected none, all or special tokens of " + dir + " (e.g. " +
                  model::quote(tok.specials().front().text) + "), got " + model::quote(name));
    names.push_back(std::move(name));
    i = j + 1;
  }
  return text::AllowedSpecials::only(std::move(names));
}

bool valid_utf8(std::string_view b) {
  for (size_t i = 0; i < b.size();) {
    const size_t len = text::utf8_sequence_length(b.substr(i));
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string tiktoken_decode(const text::Tokenizer& tok, const std::vector<uint32_t>& ids) {
  text::StreamDecoder d(tok);
  std::string out;
  for (uint32_t id : ids) out += d.push(id);
  return out + d.finish();
}

}  // namespace

int run_tokenize(const TokenizeOptions& opt) {
  const int given = int(opt.text_given) + int(opt.text_file_given) + int(opt.ids_given);
  if (given != 1)
    throw Error("tokenize: expected exactly one of --text, --text-file and --ids, got " +
                (given == 0 ? std::string("none") : std::to_string(given)));
  const text::Tokenizer tok = text::Tokenizer::load(opt.dir);
  if (opt.ids_given) {
    if (opt.specials != "none") throw Error("tokenize: --specials: expected it only with --text or --text-file");
    const std::vector<uint32_t> ids = parse_ids(opt.ids, tok.vocab_size(), opt.dir);
    const std::string text = tiktoken_decode(tok, ids);
    if (opt.json) {
      std::printf("%s\n", nlohmann::json{{"ids", ids}, {"text", text}}.dump().c_str());
    } else {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::printf("\n");
    }
    return 0;
  }
  const text::AllowedSpecials allowed = parse_specials(opt.specials, tok, opt.dir);
  const std::string input =
      opt.text_given ? opt.text : model::read_text_file(opt.text_file, "tokenize: --text-file: ", kMaxTextFileBytes);
  text::decode_utf8(input, opt.text_given ? "tokenize: --text" : "tokenize: --text-file " + opt.text_file);
  const std::vector<uint32_t> ids = tok.encode(input, allowed);
  if (opt.json) {
    // Each token's bytes as text where they are valid UTF-8 on their own, else as a list of byte values.
    nlohmann::json tokens = nlohmann::json::array();
    for (uint32_t id : ids) {
      const std::string& b = tok.token_bytes(id);
      nlohmann::json t{{"id", id}, {"special", tok.is_special(id)}};
      if (valid_utf8(b)) {
        t["text"] = b;
      } else {
        std::vector<unsigned> bytes;
        for (char c : b) bytes.push_back(static_cast<unsigned char>(c));
        t["bytes"] = bytes;
      }
      tokens.push_back(std::move(t));
    }
    std::printf("%s\n", nlohmann::json{{"ids", ids}, {"count", ids.size()}, {"tokens", tokens}}.dump().c_str());
  } else {
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) line += (i ? "," : "") + std::to_string(ids[i]);
    std::printf("%s\n", line.c_str());
  }
  return 0;
}

}  // namespace kimi::cli
