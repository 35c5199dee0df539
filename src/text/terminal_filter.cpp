// src/text/terminal_filter.cpp: see terminal_filter.h.
#include "text/terminal_filter.h"

#include <cstdio>

namespace kimi::text {

namespace {
void c1(std::string& out, unsigned char second) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "<U+%04X>", unsigned(second));  // C2 xx encodes U+00xx
  out += buf;
}
}  // namespace

std::string TerminalFilter::feed(std::string_view piece) {
  std::string out;
  out.reserve(piece.size());
  size_t i = 0;
  if (held_c2_) {
    held_c2_ = false;
    if (piece.empty()) {
      held_c2_ = true;
      return out;
    }
    const auto b = static_cast<unsigned char>(piece[0]);
    if (b >= 0x80 && b <= 0x9F) c1(out, b), i = 1;
    else out += '\xC2';
  }
  for (; i < piece.size(); ++i) {
    const auto b = static_cast<unsigned char>(piece[i]);
    if (b == '\n' || b == '\t') {
      out += char(b);
    } else if (b < 0x20) {
      out += '^';
      out += char(b + 0x40);
    } else if (b == 0x7F) {
      out += "^?";
    } else if (b == 0xC2) {
      if (i + 1 == piece.size()) {
        held_c2_ = true;
      } else {
        const auto n = static_cast<unsigned char>(piece[i + 1]);
        if (n >= 0x80 && n <= 0x9F) c1(out, n), ++i;
        else out += char(b);
      }
    } else {
      out += char(b);
    }
  }
  return out;
}

std::string TerminalFilter::finish() {
  std::string out;
  if (held_c2_) out += '\xC2';
  held_c2_ = false;
  return out;
}

std::string terminal_safe(std::string_view text) {
  TerminalFilter f;
  std::string out = f.feed(text);
  return out + f.finish();
}

}  // namespace kimi::text
