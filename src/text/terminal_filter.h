// src/text/terminal_filter.h: model text made safe to print on a terminal.
//
// A model can emit any bytes, including ESC sequences that move the cursor, recolour, retitle the window or (on
// some terminals) write files. Before `kimi chat` prints a reply on a terminal, every control character except
// newline and tab is shown in caret notation instead of being sent: C0 controls 0x00-0x1F as ^@ .. ^_ (ESC as
// ^[), DEL as ^?, and the C1 controls U+0080-U+009F (UTF-8 C2 80 .. C2 9F) as <U+0080> .. <U+009F>. Everything
// else, including invalid UTF-8, passes unchanged (the terminal shows its own replacement for those).
// Streaming: feed() takes the text in pieces; a piece ending in 0xC2 holds that byte until the next piece decides
// whether it starts a C1 control; finish() returns what is held.
#pragma once

#include <string>
#include <string_view>

namespace kimi::text {

class TerminalFilter {
 public:
  std::string feed(std::string_view piece);
  std::string finish();

 private:
  bool held_c2_ = false;  // the last piece ended in 0xC2
};

// The whole text at once.
std::string terminal_safe(std::string_view text);

}  // namespace kimi::text
