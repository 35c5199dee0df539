// text/utf8.h: UTF-8 to scalar values, and the longest complete-UTF-8 prefix of a byte stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kimi::text {

// Text as scalar values with the byte offset of each: offsets has one more entry than cps (the text's size), so
// scalar value i spans bytes [offsets[i], offsets[i + 1]).
struct Decoded {
  std::vector<uint32_t> cps;
  std::vector<size_t> offsets;
};

// Decodes well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF). Otherwise throws
// kimi::Error "<where>: expected valid UTF-8, got <reason> (0xNN) at byte <offset>", where names the command and
// argument (e.g. "encode: argument 'text'"). tiktoken takes a Python str, which cannot hold invalid UTF-8, so there
// is nothing to match: invalid input is refused, never replaced.
Decoded decode_utf8(std::string_view text, const std::string& where);

// The length of a well-formed UTF-8 sequence starting at s[0], or 0 when s does not start with one (invalid lead or
// continuation bytes, overlong forms, surrogates, > U+10FFFF, or a sequence cut short by the end of s).
size_t utf8_sequence_length(std::string_view s);

// Whether s could be the start of a well-formed sequence that later bytes complete (a truncated, otherwise valid
// sequence of 1-3 bytes).
bool utf8_incomplete_prefix(std::string_view s);

// For s not starting with a well-formed sequence: the length of its "maximal subpart" (Unicode 3.9, U+FFFD
// substitution): the bytes that start a well-formed sequence but are cut short, or 1. Python's
// bytes.decode("utf-8", "replace"), which tiktoken's decode uses, writes one U+FFFD per maximal subpart.
size_t utf8_maximal_subpart(std::string_view s);

}  // namespace kimi::text
