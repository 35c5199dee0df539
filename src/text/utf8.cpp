// text/utf8.cpp: strict UTF-8 decoding (utf8.h).
#include "text/utf8.h"

#include <cstdio>

#include "kimi/error.h"

namespace kimi::text {

namespace {

// For lead byte b: the sequence length (0 for a byte that cannot lead) and the allowed range of the second byte
// (Unicode Table 3-7: it excludes overlong forms, surrogates and values above U+10FFFF).
struct Lead {
  size_t len;
  uint8_t lo, hi;
};

Lead lead_of(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// How many bytes of s (at most the sequence's length) are a valid start of the sequence s[0] leads.
size_t valid_bytes(std::string_view s, const Lead& l) {
  if (l.len <= 1 || s.size() < 2) return s.empty() ? 0 : 1;
  auto b1 = static_cast<uint8_t>(s[1]);
  if (b1 < l.lo || b1 > l.hi) return 1;
  size_t n = 2;
  while (n < l.len && n < s.size() && (static_cast<uint8_t>(s[n]) & 0xC0) == 0x80) ++n;
  return n;
}

}  // namespace

size_t utf8_sequence_length(std::string_view s) {
  if (s.empty()) return 0;
  Lead l = lead_of(static_cast<uint8_t>(s[0]));
  if (l.len == 0) return 0;
  return valid_bytes(s, l) == l.len ? l.len : 0;
}

bool utf8_incomplete_prefix(std::string_view s) {
  if (s.empty() || s.size() >= 4) return false;
  Lead l = lead_of(static_cast<uint8_t>(s[0]));
  return l.len > s.size() && valid_bytes(s, l) == s.size();
}

size_t utf8_maximal_subpart(std::string_view s) {
  if (s.empty()) return 0;
  Lead l = lead_of(static_cast<uint8_t>(s[0]));
  return l.len == 0 ? 1 : valid_bytes(s, l);
}

Decoded decode_utf8(std::string_view text, const std::string& where) {
  Decoded d;
  d.cps.reserve(text.size());
  d.offsets.reserve(text.size() + 1);
  size_t i = 0;
  while (i < text.size()) {
    auto b = static_cast<uint8_t>(text[i]);
    if (b < 0x80) {
      d.cps.push_back(b);
      d.offsets.push_back(i++);
      continue;
    }
    size_t len = utf8_sequence_length(text.substr(i));
    if (len == 0) {
      std::string_view rest = text.substr(i, 4);
      const char* reason = utf8_incomplete_prefix(rest) && rest.size() == text.size() - i
                               ? "a truncated sequence"
                               : "an invalid byte sequence";
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", b);
      throw Error(where + ": expected valid UTF-8, got " + reason + " (" + hex + ") at byte " +
                  std::to_string(i));
    }
    uint32_t cp = b & (0xFF >> (len + 1));
    for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<uint8_t>(text[i + k]) & 0x3F);
    d.cps.push_back(cp);
    d.offsets.push_back(i);
    i += len;
  }
  d.offsets.push_back(text.size());
  return d;
}

}  // namespace kimi::text
