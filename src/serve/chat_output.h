// serve/chat_output.h: /v1/chat/completions on the chat formats of text/chat.h.
//
// make_chat_job renders the request's messages (and tools) with the tokenizer's chat format (detect_chat_format),
// encodes the prompt (user text never becomes a special token), and prepares the output side: the format's stop
// tokens, and a ChatOutput that parses the generated ids (ChatOutputParser) into OpenAI's message fields:
//   reasoning -> "reasoning_content", content -> "content", tool calls -> "tool_calls" (finish_reason "tool_calls")
// Stop strings apply to the content (cut before the first, held back while a partial match is possible); the engine
// gets its own parser and matcher through ends_after, so it stops at the token that completes one.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "serve/output.h"
#include "serve/request.h"
#include "text/tokenizer.h"

namespace kimi::serve {

struct ChatJob {
  std::vector<int32_t> prompt;
  std::vector<int32_t> stop_tokens;
  std::function<bool(int32_t)> ends_after;  // empty without stop strings
  std::unique_ptr<Output> output;
};

// ApiError 400 naming the field for a conversation the format cannot render (e.g. a tool result naming no tool), or
// when the tokenizer has no chat format ("model": the checkpoint cannot chat).
ChatJob make_chat_job(const text::Tokenizer& tok, const ChatCompletionRequest& r);

}  // namespace kimi::serve
