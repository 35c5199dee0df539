// text/random_tokenizer.cpp: the tokenizer files of a random checkpoint (random_tokenizer.h).
#include "text/random_tokenizer.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kimi/error.h"
#include "text/train_bpe.h"
#include "text/vocab_files.h"

namespace kimi::text {

namespace {

// Offsets from N = the first special id; the released checkpoints' ids are 163584 + offset (docs/text/tokenizer.md
// cites the sources).
constexpr NamedSpecial kKimiLinear[] = {
    {0, "[BOS]"},
    {1, "[EOS]"},
    {2, "<|im_end|>"},
    {3, "<|im_user|>"},
    {4, "<|im_assistant|>"},
    {6, "<|start_header_id|>"},
    {7, "<|end_header_id|>"},
    {9, "[EOT]"},
    {10, "<|im_system|>"},
    {11, "<|tool_calls_section_begin|>"},
    {12, "<|tool_calls_section_end|>"},
    {13, "<|tool_call_begin|>"},
    {14, "<|tool_call_argument_begin|>"},
    {15, "<|tool_call_end|>"},
    {17, "<|im_middle|>"},
    {254, "[UNK]"},
    {255, "[PAD]"},
};

constexpr NamedSpecial kK3[] = {
    {0, "[BOS]"},
    {1, "[EOS]"},
    {2, "<|end_of_msg|>"},
    {3, "<|open|>"},
    {4, "<|close|>"},
    {5, "<|sep|>"},
    {6, "[start_header_id]"},
    {7, "[end_header_id]"},
    {9, "[EOT]"},
    {18, "<|media_begin|>"},
    {19, "<|media_content|>"},
    {20, "<|media_end|>"},
    {21, "<|media_pad|>"},
    {65, "<osagent_mode>"},
    {254, "[UNK]"},
    {255, "[PAD]"},
};

// Standard base64 (RFC 4648, '=' padding), as tiktoken.model holds each token's bytes.
std::string base64_encode(std::string_view in) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  for (size_t i = 0; i < in.size(); i += 3) {
    const size_t n = std::min<size_t>(3, in.size() - i);
    uint32_t w = uint32_t(uint8_t(in[i])) << 16;
    if (n > 1) w |= uint32_t(uint8_t(in[i + 1])) << 8;
    if (n > 2) w |= uint32_t(uint8_t(in[i + 2]));
    out += kAlphabet[(w >> 18) & 63];
    out += kAlphabet[(w >> 12) & 63];
    out += n > 1 ? kAlphabet[(w >> 6) & 63] : '=';
    out += n > 2 ? kAlphabet[w & 63] : '=';
  }
  return out;
}

void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (f) f.write(bytes.data(), std::streamsize(bytes.size()));
  if (!f || !f.flush())
    throw Error("random-model: tokenizer: cannot write '" + path.string() + "': " +
                std::strerror(errno ? errno : EIO));
}

}  // namespace

std::span<const NamedSpecial> named_specials(SpecialFamily family) {
  if (family == SpecialFamily::k3) return kK3;
  return kKimiLinear;
}

void write_random_tokenizer(const std::string& dir, int64_t vocab_size, SpecialFamily family) {
  if (vocab_size < kMinTokenizerVocab)
    throw Error("random-model: tokenizer: expected vocab_size >= " + std::to_string(kMinTokenizerVocab) +
                " (256 byte tokens + 256 special tokens), got " + std::to_string(vocab_size));
  const uint32_t n = uint32_t(vocab_size - kNumReservedSpecialTokens);
  const std::vector<std::string> by_rank = train_byte_bpe(kBpeCorpus, n);
  std::string model;
  for (size_t r = 0; r < by_rank.size(); ++r) model += base64_encode(by_rank[r]) + " " + std::to_string(r) + "\n";

  std::vector<std::string> names(kNumReservedSpecialTokens);
  for (uint32_t k = 0; k < kNumReservedSpecialTokens; ++k)
    names[k] = "<|reserved_token_" + std::to_string(n + k) + "|>";
  for (const NamedSpecial& s : named_specials(family)) names[s.offset] = s.text;
  nlohmann::ordered_json decoder = nlohmann::ordered_json::object();
  for (uint32_t k = 0; k < kNumReservedSpecialTokens; ++k)
    decoder[std::to_string(n + k)] = {{"content", names[k]}, {"lstrip", false},     {"normalized", false},
                                      {"rstrip", false},     {"single_word", false}, {"special", true}};
  const nlohmann::ordered_json config = {
      {"added_tokens_decoder", decoder},
      {"bos_token", "[BOS]"},
      {"eos_token", "[EOS]"},
      {"unk_token", "[UNK]"},
      {"pad_token", "[PAD]"},
      {"clean_up_tokenization_spaces", false},
      {"model_max_length", 1048576},
      {"tokenizer_class", "TikTokenTokenizer"},
  };
  const std::filesystem::path d(dir);
  write_file(d / "tiktoken.model", model);
  write_file(d / "tokenizer_config.json", config.dump(2) + "\n");
}

}  // namespace kimi::text
