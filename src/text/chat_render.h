// text/chat_render.h: what the two renderers share (chat.cpp validates a request, then calls one of them).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "text/chat.h"
#include "text/chat_json.h"

namespace kimi::text {

// Appends segments, merging neighbours of the same kind; empty text adds nothing.
class SegmentWriter {
 public:
  void tmpl(std::string_view s) { add(s, true); }
  void user(std::string_view s) { add(s, false); }
  std::vector<ChatSegment> take() { return std::move(out_); }

 private:
  void add(std::string_view s, bool is_template) {
    if (s.empty()) return;
    if (!out_.empty() && out_.back().template_text == is_template)
      out_.back().text += s;
    else
      out_.push_back({std::string(s), is_template});
  }
  std::vector<ChatSegment> out_;
};

// tools: the parsed "tools" array (null when the request has none).
std::vector<ChatSegment> render_k2(const ChatRequest& r, const OrderedJson& tools);
std::vector<ChatSegment> render_k3(const ChatRequest& r, const OrderedJson& tools);

}  // namespace kimi::text
