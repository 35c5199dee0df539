// tests/test_tokenizer_golden.cpp: the tokenizer against goldens from tiktoken (scripts/text/gen_goldens.py).
//
// Each vocabulary directory under tests/fixtures/text holds a checkpoint-like tokenizer (tiktoken.model,
// tokenizer_config.json) and goldens.json: token ids that tokenization_kimi.py's encode over the tiktoken package
// gives for the corpus (scripts/text/corpus.py), with the allowed special tokens of each case, and tiktoken's decode
// of random id sequences. Long inputs are stored as a recipe (strings and repeat counts) with the id count, an
// FNV-1a hash and the first and last ids. With KIMI_TOKENIZER_DIR=<checkpoint> and KIMI_TOKENIZER_GOLDENS=<file
// from gen_goldens.py --checkpoint> the same checks also run on a real checkpoint's tokenizer.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "text/stream_decoder.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace kimi::text {
namespace {

using nlohmann::json;

struct GoldenSet {
  std::string name, dir, goldens;
};
void PrintTo(const GoldenSet& s, std::ostream* os) { *os << s.name << " (" << s.goldens << ")"; }

std::vector<GoldenSet> golden_sets() {
  const std::string root = std::string(KIMI_FIXTURES_DIR) + "/text/";
  std::vector<GoldenSet> sets = {{"trained", root + "trained", root + "trained/goldens.json"},
                                 {"shuffled", root + "shuffled", root + "shuffled/goldens.json"},
                                 {"substrings", root + "substrings", root + "substrings/goldens.json"}};
  const char* dir = std::getenv("KIMI_TOKENIZER_DIR");
  const char* goldens = std::getenv("KIMI_TOKENIZER_GOLDENS");
  if (dir && goldens) sets.push_back({"checkpoint", dir, goldens});
  return sets;
}

json read_json(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << path;
  std::stringstream ss;
  ss << f.rdbuf();
  return json::parse(ss.str());
}

AllowedSpecials allowed_of(const json& a) {
  if (a.is_string()) return a == "all" ? AllowedSpecials::all() : AllowedSpecials::none();
  return AllowedSpecials::only(a.get<std::vector<std::string>>());
}

std::string fnv1a64(const std::vector<uint32_t>& ids) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (uint32_t t : ids)
    for (int k = 0; k < 4; ++k) h = (h ^ ((t >> (8 * k)) & 0xFF)) * 0x100000001B3ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

class TokenizerGolden : public ::testing::TestWithParam<GoldenSet> {};

TEST_P(TokenizerGolden, EncodeEqualsTiktoken) {
  const Tokenizer tok = Tokenizer::load(GetParam().dir);
  const json g = read_json(GetParam().goldens);
  size_t checked = 0;
  for (const json& c : g["encode"]) {
    const AllowedSpecials allowed = allowed_of(c["allowed"]);
    if (c.contains("text")) {
      const std::string text = c["text"];
      EXPECT_EQ(tok.encode(text, allowed), c["ids"].get<std::vector<uint32_t>>())
          << "text: " << json(text).dump() << " allowed: " << c["allowed"].dump();
    } else {
      std::string text;
      for (const json& part : c["repeat"])
        for (int k = 0; k < part[1].get<int>(); ++k) text += part[0].get<std::string>();
      const std::vector<uint32_t> ids = tok.encode(text, allowed);
      const std::string name = c["name"];
      ASSERT_EQ(ids.size(), c["count"].get<size_t>()) << name;
      const auto head = c["head"].get<std::vector<uint32_t>>(), tail = c["tail"].get<std::vector<uint32_t>>();
      EXPECT_EQ(std::vector<uint32_t>(ids.begin(), ids.begin() + head.size()), head) << name;
      EXPECT_EQ(std::vector<uint32_t>(ids.end() - tail.size(), ids.end()), tail) << name;
      EXPECT_EQ(fnv1a64(ids), c["fnv1a64"].get<std::string>()) << name;
    }
    ++checked;
  }
  EXPECT_GT(checked, 500u);
}

TEST_P(TokenizerGolden, DecodeAndStreamEqualTiktoken) {
  const Tokenizer tok = Tokenizer::load(GetParam().dir);
  const json g = read_json(GetParam().goldens);
  size_t partial = 0;  // cases whose stream held bytes back at some token
  for (const json& c : g["decode"]) {
    const auto ids = c["ids"].get<std::vector<uint32_t>>();
    StreamDecoder stream(tok);
    std::string streamed;
    bool held = false;
    for (uint32_t id : ids) {
      const std::string piece = stream.push(id);
      EXPECT_NO_THROW(decode_utf8(piece, "streamed piece")) << "a streamed piece is not valid UTF-8";
      held |= stream.pending() > 0;
      streamed += piece;
    }
    streamed += stream.finish();
    EXPECT_EQ(streamed, c["text"].get<std::string>()) << "ids: " << c["ids"].dump();
    partial += held;
  }
  EXPECT_GT(partial, 10u);  // the random sequences do cut characters
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, TokenizerGolden, ::testing::ValuesIn(golden_sets()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace kimi::text
