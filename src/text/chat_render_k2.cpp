// text/chat_render_k2.cpp: the Kimi-Linear / K2 prompt, as moonshotai/Kimi-K2-Thinking's chat_template.jinja renders
// it (tests/fixtures/text/chat/kimi_k2.jinja; docs/text/chat.md):
//
//   [<|im_system|>tool_declare<|im_middle|>TOOLS<|im_end|>]            TOOLS: json.dumps(tools, separators=(",", ":"))
//   [<|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI.<|im_end|>]
//                                                                       when the first message is not a system one
//   per message: <|im_user|> / <|im_assistant|> / <|im_system|> (system and tool), NAME<|im_middle|>, then
//     assistant  <think>R</think>CONTENT[<|tool_calls_section_begin|>(<|tool_call_begin|>ID<|tool_call_argument_begin|>
//                ARGS<|tool_call_end|>)*<|tool_calls_section_end|>]
//     tool       ## Return of ID\nCONTENT
//     others     CONTENT
//   and <|im_end|>; NAME is the message's name, else its role.
//   [<|im_assistant|>assistant<|im_middle|>]                             the generation prompt
//
// R is the reasoning only for assistant messages after the last assistant message without tool calls (the turn in
// progress, with its tool round trips); earlier turns keep an empty <think></think>.
#include "text/chat_render.h"

namespace kimi::text {

std::vector<ChatSegment> render_k2(const ChatRequest& r, const OrderedJson& tools) {
  SegmentWriter w;
  if (tools.is_array() && !tools.empty()) {
    w.tmpl("<|im_system|>tool_declare<|im_middle|>");
    w.user(python_json_dumps(tools, {.compact = true}));
    w.tmpl("<|im_end|>");
  }
  const auto& msgs = r.messages;
  if (msgs.empty() || msgs[0].role != "system")
    w.tmpl("<|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI.<|im_end|>");

  // The last assistant message without tool calls: reasoning after it is kept.
  ptrdiff_t last_plain = -1;
  for (ptrdiff_t i = ptrdiff_t(msgs.size()) - 1; i >= 0; --i)
    if (msgs[size_t(i)].role == "assistant" && msgs[size_t(i)].tool_calls.empty()) {
      last_plain = i;
      break;
    }

  for (size_t i = 0; i < msgs.size(); ++i) {
    const ChatMessage& m = msgs[i];
    w.tmpl(m.role == "user" ? "<|im_user|>" : m.role == "assistant" ? "<|im_assistant|>" : "<|im_system|>");
    if (!m.name.empty())
      w.user(m.name);
    else
      w.tmpl(m.role);
    w.tmpl("<|im_middle|>");
    if (m.role == "assistant") {
      w.tmpl("<think>");
      if (ptrdiff_t(i) > last_plain) w.user(m.reasoning);
      w.tmpl("</think>");
      w.user(m.content);
      if (!m.tool_calls.empty()) {
        w.tmpl("<|tool_calls_section_begin|>");
        for (const ToolCall& c : m.tool_calls) {
          w.tmpl("<|tool_call_begin|>");
          w.user(c.id);
          w.tmpl("<|tool_call_argument_begin|>");
          w.user(c.arguments);
          w.tmpl("<|tool_call_end|>");
        }
        w.tmpl("<|tool_calls_section_end|>");
      }
    } else if (m.role == "tool") {
      w.tmpl("## Return of ");
      w.user(m.tool_call_id);
      w.tmpl("\n");
      w.user(m.content);
    } else {
      w.user(m.content);
    }
    w.tmpl("<|im_end|>");
  }
  if (r.add_generation_prompt) w.tmpl("<|im_assistant|>assistant<|im_middle|>");
  return w.take();
}

}  // namespace kimi::text
