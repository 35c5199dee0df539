// tests/test_random_tokenizer.cpp: the tokenizer `kimi random-model` writes (text/random_tokenizer.h,
// text/train_bpe.h): the trained ranks, the files loading with Tokenizer::load at the config's vocabulary, the
// family's specials at their ids, round trips. tiktoken reading the same files is the ctest
// random_model_tokenizer_tiktoken (tests/text/random_model_tokenizer.py).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "expect_error.h"
#include "kimi/model/config.h"
#include "temp_dir.h"
#include "text/random_tokenizer.h"
#include "text/tokenizer.h"
#include "text/train_bpe.h"

namespace kimi::text {
namespace {

using testutil::TempDir;

const std::vector<std::string> kTexts = {
    "The quick brown fox jumps over the lazy dog.",
    "def add(a, b):\n    return a + b\n",
    "机器学习是人工智能的一个分支。今日はいい天気ですね。",
    "Mixed: 中文 English 123456 \t\r\n  tabs and \xF0\x9F\x98\x80 emoji",
    "<|im_end|> and <|end_of_msg|> are text here",
    "",
};

TEST(TrainBpe, BytesFirstThenMergesThenFiller) {
  const std::vector<std::string> r = train_byte_bpe(kBpeCorpus, 2000);
  ASSERT_EQ(r.size(), 2000u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(r[size_t(b)], std::string(1, char(b)));
  std::set<std::string> distinct(r.begin(), r.end());
  EXPECT_EQ(distinct.size(), r.size());
  // The corpus's most frequent pairs come first: " t" / "th" / "he" are among the first merges of English text.
  EXPECT_TRUE(distinct.count(" the"));
  EXPECT_TRUE(distinct.count("\xE7\x9A\x84"));  // 的, a frequent Han character, merged from its 3 bytes
  // Deterministic.
  EXPECT_EQ(train_byte_bpe(kBpeCorpus, 2000), r);
  // A prefix of a longer training: the merges do not depend on the target size.
  const std::vector<std::string> small = train_byte_bpe(kBpeCorpus, 600);
  EXPECT_EQ(small, std::vector<std::string>(r.begin(), r.begin() + 600));
}

TEST(TrainBpe, FillerPastTheCorpusMerges) {
  // The corpus gives about 1,300 merges; the rest are two-byte strings in byte order, then three-byte ones.
  const std::vector<std::string> r = train_byte_bpe(kBpeCorpus, 80000);
  ASSERT_EQ(r.size(), 80000u);
  std::set<std::string> distinct(r.begin(), r.end());
  EXPECT_EQ(distinct.size(), r.size());
  size_t three = 0;
  for (size_t i = 256; i < r.size(); ++i) three += r[i].size() == 3 && r[i][0] == '\0';
  EXPECT_GT(three, 0u);  // past all 65,536 two-byte strings
  EXPECT_EQ(r.back().size(), 3u);
}

TEST(TrainBpe, TooFewRanks) {
  EXPECT_KIMI_ERROR(train_byte_bpe(kBpeCorpus, 255),
                    "train_byte_bpe: expected at least 256 ranks (the single bytes), got 255");
}

void expect_round_trips(const Tokenizer& tok) {
  for (const std::string& t : kTexts) {
    const std::vector<uint32_t> ids = tok.encode(t, AllowedSpecials::none());
    for (uint32_t id : ids) EXPECT_FALSE(tok.is_special(id)) << t;  // user text never becomes a special
    EXPECT_EQ(tok.decode(ids), t);
  }
  const std::string corpus(kBpeCorpus);
  EXPECT_EQ(tok.decode(tok.encode(corpus, AllowedSpecials::none())), corpus);
}

TEST(RandomTokenizer, TinyK3VocabularyIsBytesAndK3Specials) {
  TempDir dir("kimi-rtok");
  const model::Config c = model::named_config("k3-tiny");
  ASSERT_TRUE(c.k3_wrapper);
  write_random_tokenizer(dir.str(), c.vocab_size, SpecialFamily::k3);
  const Tokenizer tok = Tokenizer::load(dir.str());
  EXPECT_EQ(int64_t(tok.vocab_size()), c.vocab_size);
  EXPECT_EQ(tok.num_base_tokens(), 256u);
  EXPECT_EQ(tok.special_id("[BOS]"), 256u);
  EXPECT_EQ(tok.special_id("<|end_of_msg|>"), 258u);
  EXPECT_EQ(tok.special_id("<|open|>"), 259u);
  EXPECT_EQ(tok.special_id("<|close|>"), 260u);
  EXPECT_EQ(tok.special_id("<|sep|>"), 261u);
  EXPECT_EQ(tok.special_id("[PAD]"), 511u);
  EXPECT_EQ(tok.special_id("<|reserved_token_264|>"), 264u);  // offset 8 is unnamed
  EXPECT_FALSE(tok.special_id("<|im_end|>"));
  // Bytes only: one id per byte.
  EXPECT_EQ(tok.encode("hello", AllowedSpecials::none()), (std::vector<uint32_t>{'h', 'e', 'l', 'l', 'o'}));
  const std::vector<uint32_t> ids = tok.encode("<|open|>hi<|sep|>", AllowedSpecials::all());
  EXPECT_EQ(ids, (std::vector<uint32_t>{259, 'h', 'i', 261}));
  expect_round_trips(tok);
}

TEST(RandomTokenizer, KimiLinearVocabularyWithMerges) {
  TempDir dir("kimi-rtok");
  write_random_tokenizer(dir.str(), 4096, SpecialFamily::kimi_linear);
  const Tokenizer tok = Tokenizer::load(dir.str());
  EXPECT_EQ(tok.vocab_size(), 4096u);
  EXPECT_EQ(tok.num_base_tokens(), 3840u);
  EXPECT_EQ(tok.special_id("<|im_end|>"), 3842u);
  EXPECT_EQ(tok.special_id("<|im_user|>"), 3843u);
  EXPECT_EQ(tok.special_id("<|im_assistant|>"), 3844u);
  EXPECT_EQ(tok.special_id("<|im_system|>"), 3850u);
  EXPECT_EQ(tok.special_id("<|tool_calls_section_begin|>"), 3851u);
  EXPECT_EQ(tok.special_id("<|im_middle|>"), 3857u);
  EXPECT_EQ(tok.special_id("[UNK]"), 4094u);
  EXPECT_FALSE(tok.special_id("<|end_of_msg|>"));
  // Merges: English and Chinese take fewer ids than bytes.
  const std::string en = "The quick brown fox jumps over the lazy dog.";
  EXPECT_LT(tok.encode(en, AllowedSpecials::none()).size(), en.size() / 2);
  const std::string zh = "机器学习是人工智能的一个分支。";
  EXPECT_LT(tok.encode(zh, AllowedSpecials::none()).size(), zh.size() / 2);
  expect_round_trips(tok);
}

TEST(RandomTokenizer, FamiliesNameDistinctSpecialsInRange) {
  for (SpecialFamily f : {SpecialFamily::kimi_linear, SpecialFamily::k3}) {
    std::set<std::string> names;
    std::set<uint32_t> offsets;
    for (const NamedSpecial& s : named_specials(f)) {
      EXPECT_LT(s.offset, kNumReservedSpecialTokens);
      EXPECT_TRUE(names.insert(s.text).second) << s.text;
      EXPECT_TRUE(offsets.insert(s.offset).second) << s.offset;
    }
  }
}

TEST(RandomTokenizer, VocabularyTooSmall) {
  TempDir dir("kimi-rtok");
  EXPECT_KIMI_ERROR(write_random_tokenizer(dir.str(), 511, SpecialFamily::k3),
                    "random-model: tokenizer: expected vocab_size >= 512 (256 byte tokens + 256 special tokens), "
                    "got 511");
}

}  // namespace
}  // namespace kimi::text
