// text/chat.h: the Kimi chat formats: a conversation rendered to a prompt, and generated ids parsed back.
//
// Two formats (docs/text/chat.md gives the framing, the published templates they equal and what the parser accepts):
//   kimi_k2  Kimi-Linear / K2: <|im_system|>, <|im_user|>, <|im_assistant|> turns "ROLE<|im_middle|>TEXT<|im_end|>",
//            tools declared in a first "<|im_system|>tool_declare<|im_middle|>[...]<|im_end|>" turn, tool calls as
//            <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{json}
//            <|tool_call_end|>...<|tool_calls_section_end|>, tool results as a system turn named for the tool,
//            reasoning as <think>...</think> at the start of an assistant turn. Renders as
//            moonshotai/Kimi-K2-Thinking's chat_template.jinja does.
//   kimi_k3  K3 XTML: <|open|>TAG attr="v"<|sep|> ... <|close|>TAG<|sep|> blocks: message (role), think, response,
//            tools / call / argument / json, each message ending in <|end_of_msg|>. Renders as the Kimi-K3 chat
//            template does (vendored in llama.cpp's models/templates/Kimi-K3.jinja).
//
// render_chat returns segments: template text (may hold special tokens) and user text (request content: it never
// becomes a special token, so a user cannot forge a turn). encode_chat joins the text between special tokens across
// segments before BPE, so the ids equal the tokenizer's encode of to_text() with all specials allowed whenever the
// user text holds no special-token string.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizer.h"

namespace kimi::text {

enum class ChatFormat : uint8_t { kimi_k2, kimi_k3 };  // Kimi-Linear / K2 message format; K3 XTML format

// The format a tokenizer speaks: kimi_k3 when it has <|open|>/<|close|>/<|sep|>/<|end_of_msg|>, kimi_k2 when it has
// <|im_user|>/<|im_assistant|>/<|im_middle|>/<|im_end|>; otherwise kimi::Error naming the missing tokens.
ChatFormat detect_chat_format(const Tokenizer& tok);
std::string_view to_string(ChatFormat f);  // "kimi_k2" / "kimi_k3"

struct ToolCall {
  std::string id;         // K2: "functions.NAME:IDX"
  std::string name;       // the function's name
  std::string arguments;  // JSON text (an object)
};

struct ChatMessage {
  std::string role;                   // system | user | assistant | tool (others: kimi::Error naming messages[i].role)
  std::string content;
  std::string reasoning;              // assistant's thinking (may be empty)
  std::vector<ToolCall> tool_calls;   // assistant
  std::string tool_call_id, name;     // tool results (name: the tool's; on other roles the speaker's, as OpenAI's)
};

struct ChatRequest {
  std::vector<ChatMessage> messages;
  std::string tools_json;            // the OpenAI "tools" array as JSON text ("" = no tools)
  bool add_generation_prompt = true;
  std::string thinking_effort;       // K3: "" (the template's default, max) | low | medium | high | max; K2 ignores
  bool thinking = true;              // whether the generation prompt opens a thinking block (K3; K2 has none)
};

// One rendered piece: template text (may contain special tokens) or user-supplied text (never becomes a special).
struct ChatSegment {
  std::string text;
  bool template_text;
};

// The prompt of request r in format f. Errors (kimi::Error, "render_chat: ..."): a role other than system, user,
// assistant, tool names `messages[i].role`; tools_json that is not a JSON array names `tools`; a thinking_effort
// other than the listed ones names `thinking_effort`; a K3 tool result whose tool cannot be resolved (no name, no
// matching call) names `messages[i].name`.
std::vector<ChatSegment> render_chat(ChatFormat f, const ChatRequest& r);
// The concatenation (for display and goldens).
std::string to_text(std::span<const ChatSegment> s);
// Token ids: special tokens only from template segments (every special of tok found there), user text never.
std::vector<uint32_t> encode_chat(const Tokenizer& tok, std::span<const ChatSegment> s);
// Token ids that end an assistant turn in this format: K2 <|im_end|> and [EOS]; K3 <|end_of_msg|> and [EOS] (each
// where tok has it).
std::vector<uint32_t> stop_token_ids(ChatFormat f, const Tokenizer& tok);

// Incremental parse of generated token ids back into reasoning, content and tool calls.
struct ToolCallDelta {
  int index;
  std::string id, name, arguments;  // id/name set on the first delta of a call
};
struct ChatDelta {
  std::string reasoning, content;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

class ChatOutputParser {
 public:
  // starts_in_thinking: the prompt's generation prefix opened a thinking block.
  ChatOutputParser(ChatFormat f, const Tokenizer& tok, bool starts_in_thinking);
  ~ChatOutputParser();
  ChatOutputParser(ChatOutputParser&&) noexcept;
  ChatOutputParser& operator=(ChatOutputParser&&) noexcept;

  ChatDelta push(uint32_t id);  // UTF-8 safe: never splits a code point (holds bytes back)
  ChatDelta finish();           // flushes what is held back
  const ChatMessage& message() const;  // everything so far, whole (role "assistant")

  // The whole parse of ids at once (push of every id, then finish, as one text): equal to the streamed one.
  static ChatMessage parse(ChatFormat f, const Tokenizer& tok, std::span<const uint32_t> ids,
                           bool starts_in_thinking);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kimi::text
