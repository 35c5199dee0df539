// text/vocab_files.h: a Kimi checkpoint's tokenizer files.
//
// tiktoken.model: one line per token, "<base64 of the token's bytes> <rank>" (tiktoken's load_tiktoken_bpe; empty
// lines are skipped). The ranks are the token ids and must be exactly 0..N-1, each once, every token's bytes
// distinct, and all 256 single bytes must be tokens (byte-level BPE starts from them).
// tokenizer_config.json: "added_tokens_decoder" maps ids (as strings) to {"content": name, ...}. The special tokens
// are the 256 ids N..N+255 (tokenization_kimi.py's num_reserved_special_tokens); an id the map does not name is
// "<|reserved_token_{id}|>".
// Errors name the file, and the line (tiktoken.model) or key (tokenizer_config.json) at fault.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "text/bpe.h"

namespace kimi::text {

inline constexpr uint32_t kNumReservedSpecialTokens = 256;

struct SpecialToken {
  std::string text;
  uint32_t id;
};

// Reads tiktoken.model at path: the ranks, and by_rank[r] = the bytes of rank r.
void load_tiktoken_model(const std::string& path, Ranks& ranks, std::vector<std::string>& by_rank);

// Parses tiktoken.model's text (`path` names it in messages).
void parse_tiktoken_model(const std::string& text, const std::string& path, Ranks& ranks,
                          std::vector<std::string>& by_rank);

// The 256 special tokens N..N+255 from tokenizer_config.json at path.
std::vector<SpecialToken> load_special_tokens(const std::string& path, uint32_t num_base_tokens);

}  // namespace kimi::text
