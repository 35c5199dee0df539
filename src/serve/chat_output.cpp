// Implementation of serve/chat_output.h.
#include "serve/chat_output.h"

#include "kimi/error.h"
#include "serve/api_error.h"
#include "serve/stop_strings.h"
#include "text/chat.h"

namespace kimi::serve {
namespace {

using nlohmann::json;

// The parser and the stop strings over its content: what both the engine (ends_after) and the output run.
class ChatText {
 public:
  ChatText(text::ChatFormat f, const text::Tokenizer& tok, bool thinking, std::vector<std::string> stop)
      : parser_(f, tok, thinking), stop_(std::move(stop)) {}
  text::ChatDelta push(int32_t id) { return filter(parser_.push(uint32_t(id)), false); }
  text::ChatDelta finish() { return filter(parser_.finish(), true); }
  bool stopped() const { return stop_.stopped(); }
  const text::ChatMessage& message() const { return parser_.message(); }

 private:
  text::ChatDelta filter(text::ChatDelta d, bool last) {
    if (stop_.stopped()) return {};
    d.content = stop_.push(d.content);
    if (stop_.stopped()) d.tool_calls.clear();
    else if (last) d.content += stop_.finish();
    return d;
  }
  text::ChatOutputParser parser_;
  StopMatcher stop_;
};

class ChatOutput final : public Output {
 public:
  ChatOutput(text::ChatFormat f, const text::Tokenizer& tok, bool thinking, std::vector<std::string> stop)
      : text_(f, tok, thinking, std::move(stop)) {}
  void push(std::span<const int32_t> tokens, std::vector<json>& choices) override {
    if (!opened_) {  // OpenAI's first chunk: the role
      opened_ = true;
      choices.push_back(choice({{"role", "assistant"}, {"content", ""}}));
    }
    for (int32_t t : tokens) add(text_.push(t), choices);
  }
  void finish(std::vector<json>& choices) override { add(text_.finish(), choices); }
  json whole() const override {
    json m = {{"role", "assistant"}, {"content", content_}};
    if (!reasoning_.empty()) m["reasoning_content"] = reasoning_;
    if (!calls_.empty()) {
      m["tool_calls"] = calls_;
      if (content_.empty()) m["content"] = nullptr;
    }
    return {{"index", 0}, {"message", m}, {"logprobs", nullptr}};
  }
  std::string stop_reason() const override { return calls_.empty() ? "stop" : "tool_calls"; }

 private:
  static json choice(json delta) {
    return {{"index", 0}, {"delta", std::move(delta)}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
  }
  void add(const text::ChatDelta& d, std::vector<json>& choices) {
    json delta = json::object();
    if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning, reasoning_ += d.reasoning;
    if (!d.content.empty()) delta["content"] = d.content, content_ += d.content;
    if (!d.tool_calls.empty()) {
      json calls = json::array();
      for (const text::ToolCallDelta& c : d.tool_calls) {
        json call = {{"index", c.index}};
        json fn = json::object();
        if (!c.id.empty()) call["id"] = c.id, call["type"] = "function";
        if (!c.name.empty()) fn["name"] = c.name;
        fn["arguments"] = c.arguments;
        call["function"] = fn;
        calls.push_back(call);
        // The whole message's calls: the first delta of a call opens it, later ones extend its arguments.
        if (c.index >= int(calls_.size()))
          calls_.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", ""}}}});
        json& whole = calls_[size_t(c.index)];
        whole["function"]["arguments"] = whole["function"]["arguments"].get<std::string>() + c.arguments;
      }
      delta["tool_calls"] = calls;
    }
    if (!delta.empty()) choices.push_back(choice(std::move(delta)));
  }
  ChatText text_;
  bool opened_ = false;
  std::string content_, reasoning_;
  json calls_ = json::array();
};

// "render_chat: messages[2].name: expected ..." -> "messages[2].name"
std::string field_of(const std::string& what) {
  const std::string head = "render_chat: ";
  if (what.rfind(head, 0) != 0) return {};
  const size_t end = what.find(':', head.size());
  return end == std::string::npos ? std::string() : what.substr(head.size(), end - head.size());
}

}  // namespace

ChatJob make_chat_job(const text::Tokenizer& tok, const ChatCompletionRequest& r) {
  text::ChatFormat f;
  try {
    f = text::detect_chat_format(tok);
  } catch (const Error& e) {
    throw ApiError(400, std::string("model: this checkpoint's tokenizer has no chat format: ") + e.what(), "model",
                   "unsupported_model");
  }
  text::ChatRequest cr;
  for (const ChatMessageIn& m : r.messages) {
    text::ChatMessage cm{m.role, m.content, m.reasoning, {}, m.tool_call_id, m.name};
    for (const ChatToolCall& c : m.tool_calls) cm.tool_calls.push_back({c.id, c.name, c.arguments});
    cr.messages.push_back(std::move(cm));
  }
  cr.tools_json = r.tools_json;
  cr.thinking_effort = r.reasoning_effort;
  // The K3 generation prompt opens a thinking block; K2's has none (text/chat.h).
  const bool thinking = f == text::ChatFormat::kimi_k3 && cr.thinking;
  ChatJob job;
  try {
    for (uint32_t id : text::encode_chat(tok, text::render_chat(f, cr))) job.prompt.push_back(int32_t(id));
  } catch (const Error& e) {
    const std::string field = field_of(e.what());
    throw ApiError(400, field.empty() ? std::string(e.what()) : std::string(e.what()).substr(13), field);
  }
  for (uint32_t id : text::stop_token_ids(f, tok)) job.stop_tokens.push_back(int32_t(id));
  if (!r.stop.empty()) {
    auto watch = std::make_shared<ChatText>(f, tok, thinking, r.stop);
    job.ends_after = [watch](int32_t t) {
      watch->push(t);
      return watch->stopped();
    };
  }
  job.output = std::make_unique<ChatOutput>(f, tok, thinking, r.stop);
  return job;
}

}  // namespace kimi::serve
