// tests/test_tokenizer.cpp: the tokenizer's parts and errors (src/text). Equality with tiktoken on a corpus is
// tests/test_tokenizer_golden.cpp; here: the class table on known characters, the pre-tokenizer's pieces on cases
// whose split follows from the pattern by hand, the two BPE forms against each other, chunking, the streaming
// decoder, and every loading / encoding / decoding error with its message.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "expect_error.h"
#include "temp_dir.h"
#include "text/bpe.h"
#include "text/pretokenize.h"
#include "text/stream_decoder.h"
#include "text/tokenizer.h"
#include "text/unicode_table.h"
#include "text/utf8.h"

namespace kimi::text {
namespace {

using testutil::error_message_of;
using testutil::TempDir;

const std::string kTrained = std::string(KIMI_FIXTURES_DIR) + "/text/trained";

std::vector<std::string> pieces(const std::string& s) {
  Decoded d = decode_utf8(s, "test");
  std::vector<uint8_t> flags;
  for (uint32_t c : d.cps) flags.push_back(char_flags(c));
  std::vector<Piece> ps;
  pretokenize(d.cps.data(), flags.data(), 0, d.cps.size(), ps);
  std::vector<std::string> out;
  for (const Piece& p : ps) out.push_back(s.substr(d.offsets[p.begin], d.offsets[p.end] - d.offsets[p.begin]));
  return out;
}

using V = std::vector<std::string>;

TEST(TokenizerClasses, KnownCharacters) {
  EXPECT_EQ(char_flags('A'), kUpper | kLetter);
  EXPECT_EQ(char_flags('a'), kLower | kLetter);
  EXPECT_EQ(char_flags('7'), kNumber);
  EXPECT_EQ(char_flags(' '), kSpace | kPySpace);
  EXPECT_EQ(char_flags('!'), 0);
  EXPECT_EQ(char_flags(0x1C), kPySpace);            // file separator: Python isspace, not \s
  EXPECT_EQ(char_flags(0xA0), kSpace | kPySpace);   // no-break space
  EXPECT_EQ(char_flags(0x6F22), kHan | kLetter);    // 漢
  EXPECT_EQ(char_flags(0x3005), kHan | kLetter);    // 々 (Lm, Script=Han: not in the letter branches)
  EXPECT_EQ(char_flags(0x3007), kHan | kNumber);    // 〇 (Nl, Script=Han)
  EXPECT_EQ(char_flags(0x2E80), kHan);              // ⺀ CJK radical (So, Script=Han)
  EXPECT_EQ(char_flags(0x30000), kHan | kLetter);   // CJK Extension G
  EXPECT_EQ(char_flags(0x31350), kHan | kLetter);   // CJK Extension H
  EXPECT_EQ(char_flags(0x2EBF0), kHan | kLetter);   // CJK Extension I
  EXPECT_EQ(char_flags(0x30A2), kUpper | kLower | kLetter);  // ア (Lo, Katakana)
  EXPECT_EQ(char_flags(0x0301), kUpper | kLower);   // combining acute (Mn)
  EXPECT_EQ(char_flags(0x01C5), kUpper | kLetter);  // ǅ (Lt)
  EXPECT_EQ(char_flags(0x10FFFF), 0);
  EXPECT_TRUE(folds_to(0x17F, 's'));  // ſ matches (?i:s)
  EXPECT_FALSE(folds_to(0x212A, 's'));
  EXPECT_TRUE(folds_to('L', 'l'));
}

TEST(TokenizerPretokenize, PatternAlternatives) {
  EXPECT_EQ(pieces("Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(pieces("I'm YOU'RE it'ſ"), (V{"I'm", " YOU'RE", " it'ſ"}));
  EXPECT_EQ(pieces("HTTPServer"), (V{"HTTPServer"}));    // U* L+: the upper run, then lower
  EXPECT_EQ(pieces("camelCase"), (V{"camel", "Case"}));
  EXPECT_EQ(pieces("ALLCAPS!"), (V{"ALLCAPS", "!"}));
  EXPECT_EQ(pieces("你好world"), (V{"你好", "world"}));
  EXPECT_EQ(pieces("12345"), (V{"123", "45"}));
  EXPECT_EQ(pieces("a  b"), (V{"a", " ", " b"}));          // \s+(?!\S) leaves one space for the word
  EXPECT_EQ(pieces("a   \n\n  b"), (V{"a", "   \n\n", " ", " b"}));
  EXPECT_EQ(pieces("end.\r\n\r\nx"), (V{"end", ".\r\n\r\n", "x"}));
  EXPECT_EQ(pieces(" !!x"), (V{" !!", "x"}));
  EXPECT_EQ(pieces("x  "), (V{"x", "  "}));                // whitespace at the end of the text
  EXPECT_EQ(pieces("\tword"), (V{"\tword"}));              // any non-newline prefix
  EXPECT_EQ(pieces("\nword"), (V{"\n", "word"}));
  EXPECT_EQ(pieces("\u0301abc"), (V{"\u0301abc"}));        // a mark takes the prefix slot
  EXPECT_EQ(pieces("ア漢"), (V{"ア", "漢"}));
}

TEST(TokenizerBpe, ScanAndHeapAgree) {
  const Tokenizer tok = Tokenizer::load(kTrained);
  Ranks ranks;
  for (uint32_t r = 0; r < tok.num_base_tokens(); ++r) ranks.emplace(tok.token_bytes(r), r);
  const std::vector<uint32_t> pairs = pair_ranks(ranks);
  std::mt19937 rng(3);
  const std::string alphabet = "aabbeelnrst  \n\xe6\xbc\xa2";
  for (int t = 0; t < 2000; ++t) {
    std::string piece;
    const int n = 1 + int(rng() % 300);
    for (int k = 0; k < n; ++k) piece += alphabet[rng() % alphabet.size()];
    std::vector<uint32_t> a, b, c, d;
    byte_pair_merge_scan(piece, ranks, a);
    byte_pair_merge_heap(piece, ranks, b);
    byte_pair_merge_scan(piece, ranks, c, pairs.data());  // two-byte lookups through the table
    byte_pair_merge_heap(piece, ranks, d, pairs.data());
    ASSERT_EQ(a, b) << piece;
    ASSERT_EQ(a, c) << piece;
    ASSERT_EQ(a, d) << piece;
    EXPECT_EQ(tok.decode(a), piece);
  }
}

TEST(TokenizerBpe, PairRanksAreTheTwoByteTokens) {
  const Tokenizer tok = Tokenizer::load(kTrained);
  Ranks ranks;
  for (uint32_t r = 0; r < tok.num_base_tokens(); ++r) ranks.emplace(tok.token_bytes(r), r);
  const std::vector<uint32_t> pairs = pair_ranks(ranks);
  ASSERT_EQ(pairs.size(), 65536u);
  size_t found = 0;
  for (int b0 = 0; b0 < 256; ++b0)
    for (int b1 = 0; b1 < 256; ++b1) {
      const auto it = ranks.find(std::string{char(b0), char(b1)});
      const uint32_t want = it == ranks.end() ? UINT32_MAX : it->second;
      ASSERT_EQ(pairs[b0 * 256 + b1], want) << b0 << " " << b1;
      found += it != ranks.end();
    }
  EXPECT_GT(found, 100u);  // the trained vocabulary has many two-byte merges
}

TEST(TokenizerChunks, RunSplitterCountsScalarValues) {
  auto cuts = [](const std::string& s, size_t max_run) {
    Decoded d = decode_utf8(s, "test");
    std::vector<uint8_t> flags;
    for (uint32_t c : d.cps) flags.push_back(char_flags(c));
    return split_long_runs(flags.data(), 0, flags.size(), max_run);
  };
  EXPECT_EQ(cuts("aaaaaaa", 3), (std::vector<size_t>{3, 6, 7}));
  EXPECT_EQ(cuts("éééé  x", 2), (std::vector<size_t>{2, 7}));
  EXPECT_EQ(cuts("\x1c\x1c\x1c!!!", 3), (std::vector<size_t>{6}));  // \x1c is whitespace here (Python isspace)
  EXPECT_EQ(cuts("", 3), (std::vector<size_t>{0}));
}

TEST(TokenizerSpecials, UserTextNeverBecomesASpecial) {
  const Tokenizer tok = Tokenizer::load(kTrained);
  const uint32_t end = tok.special_id("<|im_end|>").value_or(0);
  EXPECT_EQ(end, tok.num_base_tokens() + 2);
  const auto none = tok.encode("a<|im_end|>", AllowedSpecials::none());
  EXPECT_EQ(std::count(none.begin(), none.end(), end), 0);
  EXPECT_EQ(tok.decode(none), "a<|im_end|>");
  const auto all = tok.encode("a<|im_end|>", AllowedSpecials::all());
  EXPECT_EQ(all.back(), end);
  const auto only = tok.encode("<|im_user|><|im_end|>", AllowedSpecials::only({"<|im_end|>"}));
  EXPECT_EQ(only.back(), end);
  EXPECT_EQ(tok.decode(only), "<|im_user|><|im_end|>");
  EXPECT_EQ(tok.special_id("<|reserved_token_" + std::to_string(tok.num_base_tokens() + 20) + "|>").value_or(0),
            tok.num_base_tokens() + 20);
  EXPECT_EQ(tok.vocab_size(), tok.num_base_tokens() + 256);
}

TEST(TokenizerStream, HoldsBackAPartialCharacter) {
  std::vector<std::string> by_rank;
  for (int b = 0; b < 256; ++b) by_rank.push_back(std::string(1, char(b)));
  const Tokenizer tok(by_rank, {});
  StreamDecoder d(tok);
  EXPECT_EQ(d.push(0xE6), "");  // 漢 = E6 BC A2
  EXPECT_EQ(d.pending(), 1u);
  EXPECT_EQ(d.push(0xBC), "");
  EXPECT_EQ(d.push(0xA2), "漢");
  EXPECT_EQ(d.pending(), 0u);
  EXPECT_EQ(d.push('a'), "a");
  EXPECT_EQ(d.push(0xE6), "");
  EXPECT_EQ(d.push('b'), "\xEF\xBF\xBD" "b");  // cut short: U+FFFD, as bytes.decode("utf-8", "replace")
  EXPECT_EQ(d.push(0xF0), "");
  EXPECT_EQ(d.push(0x9F), "");
  EXPECT_EQ(d.finish(), "\xEF\xBF\xBD");       // one U+FFFD for the maximal subpart F0 9F
  EXPECT_EQ(d.push(0xC0), "\xEF\xBF\xBD");     // never a valid lead byte: not held
  EXPECT_EQ(d.push(0xED), "");
  EXPECT_EQ(d.push(0xA0), "\xEF\xBF\xBD\xEF\xBF\xBD");  // ED A0 would be a surrogate: two subparts
  EXPECT_KIMI_ERROR(d.push(256), "decode: argument 'ids': expected ids below 256, got 256");
}

TEST(TokenizerErrors, InvalidUtf8) {
  const Tokenizer tok = Tokenizer::load(kTrained);
  EXPECT_EQ(error_message_of([&] { tok.encode("ab\xFF", AllowedSpecials::none()); }),
            "encode: argument 'text': expected valid UTF-8, got an invalid byte sequence (0xFF) at byte 2");
  EXPECT_EQ(error_message_of([&] { tok.encode("ab\xE6\xBC", AllowedSpecials::none()); }),
            "encode: argument 'text': expected valid UTF-8, got a truncated sequence (0xE6) at byte 2");
  EXPECT_EQ(error_message_of([&] { tok.encode("\xED\xA0\x80", AllowedSpecials::none()); }),
            "encode: argument 'text': expected valid UTF-8, got an invalid byte sequence (0xED) at byte 0");
  EXPECT_EQ(error_message_of([&] { tok.encode("\xC0\xAF", AllowedSpecials::none()); }),
            "encode: argument 'text': expected valid UTF-8, got an invalid byte sequence (0xC0) at byte 0");
  EXPECT_EQ(error_message_of([&] { tok.encode("x", AllowedSpecials::only({"<|nope|>"})); }),
            "encode: argument 'allowed_specials': expected special tokens of this tokenizer, got '<|nope|>'");
  const std::vector<uint32_t> bad = {1, tok.vocab_size()};
  EXPECT_EQ(error_message_of([&] { tok.decode(bad); }),
            "decode: argument 'ids': expected ids below " + std::to_string(tok.vocab_size()) + ", got " +
                std::to_string(tok.vocab_size()) + " at position 1");
}

// A checkpoint directory with tiktoken.model lines `model` (all 256 bytes are prepended unless bytes is false)
// and tokenizer_config.json `config`.
std::string write_tokenizer(const TempDir& dir, const std::string& model, const std::string& config,
                            bool bytes = true) {
  static const char* b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::ofstream m(dir.file("tiktoken.model"));
  if (bytes)
    for (int b = 0; b < 256; ++b)
      m << b64[b >> 2] << b64[(b & 3) << 4] << "== " << b << "\n";
  m << model;
  std::ofstream(dir.file("tokenizer_config.json")) << config;
  return dir.str();
}

TEST(TokenizerErrors, MalformedFiles) {
  TempDir d("kimi-tok");
  const std::string m = d.file("tiktoken.model"), c = d.file("tokenizer_config.json");
  auto load_msg = [&](const std::string& model, const std::string& config, bool bytes = true) {
    write_tokenizer(d, model, config, bytes);
    return error_message_of([&] { Tokenizer::load(d.str()); });
  };
  EXPECT_EQ(load_msg("YWI= 256 x\n", "{}"),
            "tokenizer: " + m + ":257: expected '<base64 token> <rank>', got 'YWI= 256 x'");
  EXPECT_EQ(load_msg("YW!= 256\n", "{}"), "tokenizer: " + m + ":257: expected a base64 token, got 'YW!='");
  EXPECT_EQ(load_msg("YWI 256\n", "{}"), "tokenizer: " + m + ":257: expected a base64 token, got 'YWI'");
  EXPECT_EQ(load_msg("YWI= -1\n", "{}"),
            "tokenizer: " + m + ":257: expected a rank (an integer in [0, 4294967295]), got '-1'");
  EXPECT_EQ(load_msg("YWI= 3\n", "{}"), "tokenizer: " + m + ":257: rank 3 appears twice (first on line 4)");
  EXPECT_EQ(load_msg("YQ== 256\n", "{}"), "tokenizer: " + m + ":257: token 'YQ==' appears twice (ranks 97 and 256)");
  EXPECT_EQ(load_msg("YWI= 300\n", "{}"), "tokenizer: " + m + ": expected ranks 0..300 each once, got no rank 256");
  EXPECT_EQ(load_msg("YWI= 0\n", "{}", false),
            "tokenizer: " + m + ": expected every single byte to be a token, got none for byte '\\x00'");
  EXPECT_EQ(load_msg("", "{}", false), "tokenizer: " + m + ": expected '<base64 token> <rank>' lines, got none");
  EXPECT_EQ(load_msg("", "[]"), "tokenizer: " + c + ": expected a JSON object, got []");
  EXPECT_EQ(load_msg("", R"({"added_tokens_decoder": 3})"),
            "tokenizer: " + c + ": key 'added_tokens_decoder': expected an object, got 3");
  EXPECT_EQ(load_msg("", R"({"added_tokens_decoder": {"x1": {"content": "a"}}})"),
            "tokenizer: " + c + ": key 'added_tokens_decoder.x1': expected a token id, got 'x1'");
  EXPECT_EQ(load_msg("", R"({"added_tokens_decoder": {"12": {"content": "a"}}})"),
            "tokenizer: " + c +
                ": key 'added_tokens_decoder.12': expected a special token id in [256, 511] (after the "
                "tiktoken.model ranks), got 12");
  EXPECT_EQ(load_msg("", R"({"added_tokens_decoder": {"256": {"content": 5}}})"),
            "tokenizer: " + c +
                ": key 'added_tokens_decoder.256': expected an object with a non-empty string 'content', got "
                "{\"content\":5}");
  EXPECT_EQ(load_msg("", R"({"added_tokens_decoder": {"256": {"content": "<|a|>"}, "300": {"content": "<|a|>"}}})"),
            "tokenizer: " + c + ": special token '<|a|>' names two ids (the second is 300)");
  const std::string syntax = load_msg("", "{\"a\": }");
  EXPECT_NE(syntax.find("tokenizer: " + c), std::string::npos) << syntax;
  std::filesystem::remove(c);
  EXPECT_EQ(error_message_of([&] { Tokenizer::load(d.str()); }), "tokenizer: " + c + ": cannot open: no such file");
  EXPECT_EQ(error_message_of([&] { Tokenizer::load(m); }),
            "tokenizer: " + m + ": is a file, not a directory (expected a checkpoint with tiktoken.model and "
            "tokenizer_config.json)");
}

TEST(TokenizerLoad, EmptyLinesAndCrlfAsTiktoken) {
  TempDir d("kimi-tok");
  write_tokenizer(d, "\nYWI= 256\r\n\n", R"({"added_tokens_decoder": {"257": {"content": "<|x|>"}}})");
  const Tokenizer tok = Tokenizer::load(d.str());
  EXPECT_EQ(tok.num_base_tokens(), 257u);
  EXPECT_EQ(tok.encode("ab", AllowedSpecials::none()), (std::vector<uint32_t>{256}));
  EXPECT_EQ(tok.special_id("<|x|>").value_or(0), 257u);
  EXPECT_EQ(tok.special_id("<|reserved_token_258|>").value_or(0), 258u);
  EXPECT_FALSE(tok.special_id("<|reserved_token_256|>"));
}

}  // namespace
}  // namespace kimi::text
