// serve/stop_strings.h: OpenAI `stop` strings over streamed text.
//
// Text arrives in pieces (valid UTF-8, from text::StreamDecoder). push() returns what can be shown now: everything
// except a tail that could still be the start of a stop string (held back until later text decides), so a stream
// never shows part of a stop string. When a stop string appears, the text before its first occurrence is returned,
// the matcher is stopped() and returns nothing more; the stop string itself is never shown (OpenAI's rule).
// The held tail is a prefix of a stop string, which begins with a lead byte, so no cut splits a character.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kimi::serve {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  std::string push(std::string_view text);
  // The held tail (no stop string can complete any more); empty once stopped.
  std::string finish();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;  // non-empty strings
  std::string held_;
  bool stopped_ = false;
};

}  // namespace kimi::serve
