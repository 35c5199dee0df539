// text/stream_decoder.h: ids to text, one token at a time, emitting only complete UTF-8.
//
// A token's bytes may end inside a multi-byte character (byte-level BPE splits characters freely). push() returns
// the text that is complete so far and holds back a trailing sequence that later bytes may complete; finish()
// flushes what is held. Invalid bytes become U+FFFD, one per maximal subpart (utf8.h), so the concatenation of
// everything pushed and finished equals tiktoken's decode(ids) (bytes.decode("utf-8", "replace")), and every
// returned string is valid UTF-8 (safe to send as one SSE event).
#pragma once

#include <cstdint>
#include <string>

#include "text/tokenizer.h"

namespace kimi::text {

class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok) : tok_(tok) {}
  // The text completed by token id (possibly empty). An id >= vocab_size() is an error.
  std::string push(uint32_t id);
  // The held-back bytes as U+FFFD (empty when nothing is held), and a fresh start.
  std::string finish();
  // Bytes held back, waiting for the rest of their character (0..3).
  size_t pending() const { return pending_.size(); }

 private:
  std::string drain(bool final);
  const Tokenizer& tok_;
  std::string pending_;
};

}  // namespace kimi::text
