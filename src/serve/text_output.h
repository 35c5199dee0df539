// serve/text_output.h: a completion's text from its token ids, as /v1/completions shows it.
//
// Tokens go through text::StreamDecoder (UTF-8 safe: a character split across tokens is shown once whole), then
// StopMatcher (stop strings: cut before the first, never shown, held back while a partial match is possible).
// Stop tokens (the tokenizer's end-of-text / end-of-turn specials) end the text and are not shown.
// The same object decides when a request ends: the engine calls push() through GenerationRequest::ends_after on
// its own copy, so it stops exactly at the token that completes a stop string.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "serve/stop_strings.h"
#include "text/stream_decoder.h"
#include "text/tokenizer.h"

namespace kimi::serve {

class CompletionText {
 public:
  CompletionText(const text::Tokenizer& tok, std::vector<std::string> stop, std::vector<int32_t> stop_tokens)
      : decoder_(tok), stop_(std::move(stop)), stop_tokens_(std::move(stop_tokens)) {}
  // The text that can be shown after token id (possibly empty); nothing once stopped().
  std::string push(int32_t id);
  // The rest (held-back bytes and a partial stop-string match that can no longer complete).
  std::string finish();
  bool stopped() const { return stopped_; }

 private:
  text::StreamDecoder decoder_;
  StopMatcher stop_;
  std::vector<int32_t> stop_tokens_;
  bool stopped_ = false;
};

// The stop tokens of a tokenizer without a chat format: its [EOS] and <|im_end|> specials, where it has them.
std::vector<int32_t> default_stop_tokens(const text::Tokenizer& tok);

}  // namespace kimi::serve
