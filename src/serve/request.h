// serve/request.h: the bodies of POST /v1/completions and /v1/chat/completions, parsed and validated.
//
// Only the JSON is checked here (types, ranges, the fields this server does not support); what needs the model
// (the served name, the tokenizer, the context) is checked by the handler after it. Every refusal is an ApiError
// naming the field as the client wrote it (serve/api_error.h). Fields:
//   model (string, required)      n (1 only)              stream (bool)    stream_options.include_usage (bool)
//   temperature [0, 2] (1)        top_p (0, 1] (1)         top_k >= -1 (-1 and 0: all tokens)
//   max_tokens / max_completion_tokens >= 1 (default: up to the context)   seed (integer, any 64-bit value)
//   stop: a string or up to 4 non-empty strings
//   stream_options.continuous_usage_stats (bool, false; vLLM's field): every chunk carries the usage so far
//   completions: prompt (a string, or an array of token ids; one prompt); ignore_eos (bool, false; vLLM's field):
//         the stop tokens do not end the request, so that a benchmark's requests generate exactly max_tokens (stop
//         strings still do; chat refuses true: its output parser reads the turn end)
//   chat: messages (roles system, developer (as system), user, assistant, tool; content a string, an array of
//         {"type": "text"} parts or null), tools (array, passed to the chat template), tool_choice ("auto" or
//         "none"), reasoning_effort (low | high | max: the K3 template's thinking effort)
// Absent and null fields take the defaults. Unknown fields are ignored (clients send extras, e.g. "user");
// known fields this server does not implement are refused unless they hold their no-op value (logprobs, echo,
// best_of, suffix, logit_bias, presence_penalty, frequency_penalty, response_format other than text).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kimi::serve {

inline constexpr size_t kMaxStopStrings = 4;

struct SamplingRequest {
  std::string model;
  float temperature = 1.f;
  float top_p = 1.f;
  int top_k = 0;                        // 0: all tokens
  std::optional<int64_t> max_tokens;    // unset: until the context is full
  std::string max_tokens_field = "max_tokens";  // the field max_tokens came from (errors name it)
  std::optional<uint64_t> seed;         // unset: a fresh random draw per request
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;           // stream_options.include_usage
  bool continuous_usage = false;        // stream_options.continuous_usage_stats
};

struct CompletionRequest : SamplingRequest {
  std::string prompt_text;              // a string prompt
  std::vector<int64_t> prompt_ids;      // or token ids (checked against the vocabulary by the handler)
  bool prompt_is_ids = false;
  bool ignore_eos = false;              // the stop tokens do not end the request
};

struct ChatToolCall {
  std::string id, name, arguments;      // arguments: JSON text
};
struct ChatMessageIn {
  std::string role;                     // system | user | assistant | tool ("developer" becomes system)
  std::string content;                  // text parts concatenated
  std::string reasoning;                // assistant: reasoning_content
  std::vector<ChatToolCall> tool_calls; // assistant
  std::string tool_call_id, name;       // tool
};
struct ChatCompletionRequest : SamplingRequest {
  std::vector<ChatMessageIn> messages;
  std::string tools_json;               // the "tools" array as JSON text ("" = none, or tool_choice "none")
  std::string reasoning_effort;         // "" | low | high | max
};

// Throw ApiError (400, or 413 never: the body limit is the HTTP layer's) on any invalid field.
CompletionRequest parse_completion_request(const nlohmann::json& body);
ChatCompletionRequest parse_chat_request(const nlohmann::json& body);

}  // namespace kimi::serve
