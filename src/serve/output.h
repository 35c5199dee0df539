// serve/output.h: what a request's generated tokens become in the API's JSON.
//
// An Output turns tokens into "choice" objects: the streamed ones (chunks' choices[0]) and the whole one (the
// non-streaming response's choices[0]); the HTTP layer wraps them into OpenAI's response objects and adds
// finish_reason and usage. CompletionOutput: /v1/completions ({"text": ...}); ChatOutput (serve/chat_output.h):
// /v1/chat/completions ({"delta": {...}} / {"message": {...}}).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/text_output.h"

namespace kimi::serve {

class Output {
 public:
  virtual ~Output() = default;
  // Streamed choices for new tokens (none when nothing can be shown yet); the first call may add an opening one.
  virtual void push(std::span<const int32_t> tokens, std::vector<nlohmann::json>& choices) = 0;
  // Streamed choices for what was held back, at the end.
  virtual void finish(std::vector<nlohmann::json>& choices) = 0;
  // The whole result's choice (without finish_reason), after finish().
  virtual nlohmann::json whole() const = 0;
  // finish_reason for a request the engine ended with "stop" (chat: "tool_calls" when the message holds calls).
  virtual std::string stop_reason() const { return "stop"; }
};

class CompletionOutput final : public Output {
 public:
  CompletionOutput(const text::Tokenizer& tok, std::vector<std::string> stop, std::vector<int32_t> stop_tokens)
      : text_(tok, std::move(stop), std::move(stop_tokens)) {}
  void push(std::span<const int32_t> tokens, std::vector<nlohmann::json>& choices) override {
    std::string s;
    for (int32_t t : tokens) s += text_.push(t);
    add(std::move(s), choices);
  }
  void finish(std::vector<nlohmann::json>& choices) override { add(text_.finish(), choices); }
  nlohmann::json whole() const override { return {{"index", 0}, {"text", all_}, {"logprobs", nullptr}}; }

 private:
  void add(std::string s, std::vector<nlohmann::json>& choices) {
    if (s.empty()) return;
    all_ += s;
    choices.push_back({{"index", 0}, {"text", std::move(s)}, {"logprobs", nullptr}, {"finish_reason", nullptr}});
  }
  CompletionText text_;
  std::string all_;
};

}  // namespace kimi::serve
