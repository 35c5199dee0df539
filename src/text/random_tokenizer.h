// text/random_tokenizer.h: the tokenizer files `kimi random-model` writes beside a random checkpoint
// (docs/text/tokenizer.md "Tokenizers of random models").
//
// For a vocabulary of V ids: N = V - 256 base tokens, trained by train_byte_bpe on kBpeCorpus (train_bpe.h), in
// tiktoken.model; the 256 specials N..N+255 in tokenizer_config.json's added_tokens_decoder, every one listed (as
// the released checkpoints do): the family's named specials at their real offsets from N, the rest
// "<|reserved_token_{id}|>" (what vocab_files.h's loader and tokenization_kimi.py give an unnamed id anyway).
//
// The family follows the config's layout (kimi/model/config.h Config::k3_wrapper): a K3 config ("model_type":
// "kimi_k3" around a "text_config"; k3-tiny, k3-slice) gets K3's specials (<|end_of_msg|>, <|open|>, <|close|>,
// <|sep|>, ...), a Kimi-Linear config (kimi-linear-tiny) the Kimi-Linear / K2 ones (<|im_end|>, <|im_user|>, ...).
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace kimi::text {

enum class SpecialFamily { kimi_linear, k3 };

struct NamedSpecial {
  uint32_t offset;  // id - N
  const char* text;
};

// The named specials of a family, by offset (sources: docs/text/tokenizer.md).
std::span<const NamedSpecial> named_specials(SpecialFamily family);

// The smallest vocabulary a tokenizer can have: the 256 single bytes + the 256 specials.
inline constexpr int64_t kMinTokenizerVocab = 512;

// Writes dir/tiktoken.model and dir/tokenizer_config.json for vocab_size ids (>= kMinTokenizerVocab, else a
// kimi::Error); dir must exist. Errors name the file and why it cannot be written.
void write_random_tokenizer(const std::string& dir, int64_t vocab_size, SpecialFamily family);

}  // namespace kimi::text
