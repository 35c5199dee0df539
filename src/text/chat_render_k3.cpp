// text/chat_render_k3.cpp: the K3 XTML prompt, as the Kimi-K3 chat template renders it (the copy vendored in
// llama.cpp's models/templates/Kimi-K3.jinja; tests/fixtures/text/chat/kimi_k3.jinja; docs/text/chat.md).
//
// A block is <|open|>TAG attr="v"...<|sep|> BODY <|close|>TAG<|sep|>; attribute values escape & and " as &amp; and
// &quot;. A message is a "message" block followed by <|end_of_msg|>:
//   [message role="system" type="tool-declare": "# Tools\n...```json\n" TOOLS "\n```"]    TOOLS: keys dictsorted
//   [message role="system" type="thinking-effort": the effort sentence]                   when thinking is on
//   user / system   message role="user|system" [name="N"]: CONTENT
//   assistant       message role="assistant" [name="N"]: [think: R] response: CONTENT
//                   [tools: (call tool="NAME" index="k": ARGS)*]           think only when thinking is on
//       ARGS: an object's members as argument key="K" type="string|number|boolean|null|object|array" blocks (a
//             string's text as is, other values as JSON), else the text in a json type="object" block
//   tool            message role="tool" tool="NAME" index="k": CONTENT     k counts results since the last assistant
//   [message role="assistant"<|sep|><|open|>think<|sep|>  (or response, thinking off)]    the generation prompt
// A run of tool results whose ids all match calls of the preceding assistant message is written in the calls'
// order and named for them; otherwise in the given order, named by the message's name or the call at its position.
#include "text/chat_render.h"

#include <algorithm>

#include "kimi/error.h"
#include "model/loader_io.h"

namespace kimi::text {
namespace {

std::string escape_attr(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

// <|open|>TAG[ key="value"]...<|sep|> with user-supplied values.
struct Attr {
  std::string_view key, value;
  bool user_value;
};
void open_tag(SegmentWriter& w, std::string_view tag, std::initializer_list<Attr> attrs) {
  w.tmpl("<|open|>");
  w.tmpl(tag);
  for (const Attr& a : attrs) {
    w.tmpl(" ");
    w.tmpl(a.key);
    w.tmpl("=\"");
    if (a.user_value)
      w.user(escape_attr(a.value));
    else
      w.tmpl(escape_attr(a.value));
    w.tmpl("\"");
  }
  w.tmpl("<|sep|>");
}
void close_tag(SegmentWriter& w, std::string_view tag) {
  w.tmpl("<|close|>");
  w.tmpl(tag);
  w.tmpl("<|sep|>");
}
void end_message(SegmentWriter& w) {
  close_tag(w, "message");
  w.tmpl("<|end_of_msg|>");
}

// The message tag of a user, system or assistant message: role, and name when given.
void open_message(SegmentWriter& w, const ChatMessage& m) {
  if (m.name.empty())
    open_tag(w, "message", {{"role", m.role, false}});
  else
    open_tag(w, "message", {{"role", m.role, false}, {"name", m.name, true}});
}

std::string_view xtml_type(const OrderedJson& v) {
  if (v.is_boolean()) return "boolean";
  if (v.is_null()) return "null";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_object()) return "object";
  return "array";
}

void render_assistant(SegmentWriter& w, const ChatMessage& m, bool thinking) {
  if (thinking) {
    open_tag(w, "think", {});
    if (!python_is_blank(m.reasoning)) w.user(m.reasoning);
    close_tag(w, "think");
  }
  open_tag(w, "response", {});
  w.user(m.content);
  close_tag(w, "response");
  if (m.tool_calls.empty()) return;
  open_tag(w, "tools", {});
  for (size_t k = 0; k < m.tool_calls.size(); ++k) {
    const ToolCall& c = m.tool_calls[k];
    const std::string index = std::to_string(k + 1);
    open_tag(w, "call", {{"tool", c.name, true}, {"index", index, false}});
    const OrderedJson args = OrderedJson::parse(c.arguments, nullptr, /*allow_exceptions=*/false);
    if (args.is_object()) {
      for (auto it = args.begin(); it != args.end(); ++it) {
        open_tag(w, "argument", {{"key", it.key(), true}, {"type", xtml_type(it.value()), false}});
        w.user(it.value().is_string() ? it.value().get_ref<const std::string&>()
                                      : python_json_dumps(it.value(), {}));
        close_tag(w, "argument");
      }
    } else if (!python_is_blank(c.arguments)) {
      open_tag(w, "json", {{"type", "object", false}});
      w.user(c.arguments);
      close_tag(w, "json");
    }
    close_tag(w, "call");
  }
  close_tag(w, "tools");
}

}  // namespace

std::vector<ChatSegment> render_k3(const ChatRequest& r, const OrderedJson& tools) {
  SegmentWriter w;
  const std::string effort = r.thinking_effort.empty() ? "max" : r.thinking_effort;
  if (tools.is_array() && !tools.empty()) {
    open_tag(w, "message", {{"role", "system", false}, {"type", "tool-declare", false}});
    w.tmpl("# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n");
    w.user(python_json_dumps(tools, {.compact = true, .sort_keys_ci = true}));
    w.tmpl("\n```");
    end_message(w);
  }
  if (r.thinking) {
    open_tag(w, "message", {{"role", "system", false}, {"type", "thinking-effort", false}});
    w.tmpl("`thinking_effort` guides on how much to think in your thinking channel (not including the response "
           "channel), supported values include `low`, `medium`, `high`, and `max`.\nNow the system is invoked with "
           "`thinking_effort=");
    w.tmpl(effort);
    w.tmpl("`.");
    end_message(w);
  }

  const auto& msgs = r.messages;
  const std::vector<ToolCall>* calls = nullptr;  // the last assistant message's calls
  size_t tool_index = 0;                          // tool results written since that message
  // One tool result; name_from_call: the call it answers (resolved run), else null.
  auto render_tool = [&](size_t i, const ToolCall* answered) {
    const ChatMessage& m = msgs[i];
    ++tool_index;
    std::string name;
    bool have_name = false;
    if (answered) {
      name = answered->name, have_name = true;
    } else if (!m.name.empty()) {
      name = m.name, have_name = true;
    } else if (calls && tool_index <= calls->size()) {
      name = (*calls)[tool_index - 1].name, have_name = true;
    }
    if (!have_name)
      throw Error("render_chat: messages[" + std::to_string(i) +
                  "].name: expected the tool's name (or a tool_call_id of the preceding assistant message's calls, "
                  "or a call at its position), got none");
    const std::string index = std::to_string(tool_index);
    open_tag(w, "message", {{"role", "tool", false}, {"tool", name, true}, {"index", index, false}});
    w.user(m.content);
    end_message(w);
  };

  for (size_t i = 0; i < msgs.size(); ++i) {
    const ChatMessage& m = msgs[i];
    if (m.role == "user" || m.role == "system") {
      open_message(w, m);
      w.user(m.content);
      end_message(w);
    } else if (m.role == "assistant") {
      calls = &m.tool_calls;
      tool_index = 0;
      open_message(w, m);
      render_assistant(w, m, r.thinking);
      end_message(w);
    } else if (m.role == "tool" && (i == 0 || msgs[i - 1].role != "tool")) {
      size_t end = i;
      while (end < msgs.size() && msgs[end].role == "tool") ++end;
      bool all_resolved = calls != nullptr;
      for (size_t j = i; j < end && all_resolved; ++j) {
        bool found = false;
        if (!msgs[j].tool_call_id.empty())
          for (const ToolCall& c : *calls) found = found || c.id == msgs[j].tool_call_id;
        all_resolved = found;
      }
      if (all_resolved) {
        std::vector<std::string_view> emitted;
        for (const ToolCall& c : *calls) {
          if (std::find(emitted.begin(), emitted.end(), c.id) != emitted.end()) continue;
          emitted.push_back(c.id);
          for (size_t j = i; j < end; ++j)
            if (msgs[j].tool_call_id == c.id) render_tool(j, &c);
        }
      } else {
        for (size_t j = i; j < end; ++j) render_tool(j, nullptr);
      }
    }
  }
  if (r.add_generation_prompt) {
    open_tag(w, "message", {{"role", "assistant", false}});
    open_tag(w, r.thinking ? "think" : "response", {});
  }
  return w.take();
}

}  // namespace kimi::text
