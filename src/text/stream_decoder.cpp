// text/stream_decoder.cpp: complete-UTF-8 streaming (stream_decoder.h).
#include "text/stream_decoder.h"

#include "text/utf8.h"

namespace kimi::text {

namespace {
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
}

std::string StreamDecoder::push(uint32_t id) {
  pending_ += tok_.token_bytes(id);
  return drain(false);
}

std::string StreamDecoder::finish() { return drain(true); }

std::string StreamDecoder::drain(bool final) {
  std::string out;
  const std::string_view p = pending_;
  size_t i = 0;
  while (i < p.size()) {
    const std::string_view rest = p.substr(i);
    if (size_t len = utf8_sequence_length(rest)) {
      out += rest.substr(0, len);
      i += len;
    } else if (!final && utf8_incomplete_prefix(rest)) {
      break;  // the next token may complete it
    } else {
      out += kReplacement;
      i += utf8_maximal_subpart(rest);
    }
  }
  pending_.erase(0, i);
  return out;
}

}  // namespace kimi::text
