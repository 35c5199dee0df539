// The terminal filter of `kimi chat` (src/text/terminal_filter.h): control characters shown, never sent.
#include <gtest/gtest.h>

#include <string>

#include "text/terminal_filter.h"

namespace {
using kimi::text::TerminalFilter;
using kimi::text::terminal_safe;

TEST(TerminalFilter, PrintableTextNewlinesTabsAndUtf8PassUnchanged) {
  const std::string s = "Hello, world!\n\tcode: x = 1;\n\xE4\xBD\xA0\xE5\xA5\xBD \xC3\xA9 \xF0\x9F\x98\x80 \xC2\xA0";
  EXPECT_EQ(terminal_safe(s), s);
}

TEST(TerminalFilter, C0ControlsAndDelAreShownInCaretNotation) {
  EXPECT_EQ(terminal_safe("a\x1b[2Jb"), "a^[[2Jb");  // clear screen
  EXPECT_EQ(terminal_safe("\x1b]0;title\x07"), "^[]0;title^G");  // retitle, BEL
  EXPECT_EQ(terminal_safe(std::string("\x00\x01\r\x08\x7f", 5)), "^@^A^M^H^?");
}

TEST(TerminalFilter, C1ControlsAreShownAsCodePoints) {
  EXPECT_EQ(terminal_safe("x\xC2\x9B" "31mred"), "x<U+009B>31mred");  // CSI
  EXPECT_EQ(terminal_safe("\xC2\x80\xC2\x9F\xC2\xA0"), "<U+0080><U+009F>\xC2\xA0");
}

TEST(TerminalFilter, StreamedPiecesEqualTheWholeText) {
  const std::string s = "ok\xC2\x9B" "2J\x1b[0m \xC2\xA9 end\xC2";
  for (size_t cut = 0; cut <= s.size(); ++cut) {
    for (size_t cut2 = cut; cut2 <= s.size(); ++cut2) {
      TerminalFilter f;
      std::string out = f.feed(s.substr(0, cut));
      out += f.feed(s.substr(cut, cut2 - cut));
      out += f.feed(s.substr(cut2));
      out += f.finish();
      ASSERT_EQ(out, terminal_safe(s)) << "cuts at " << cut << ", " << cut2;
    }
  }
  EXPECT_EQ(terminal_safe(s), "ok<U+009B>2J^[[0m \xC2\xA9 end\xC2");  // a lone trailing C2 is kept as it was
}

}  // namespace
