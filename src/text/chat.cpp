// text/chat.cpp: format detection, request validation, encoding and stop tokens of the chat formats (chat.h).
#include "text/chat.h"

#include <algorithm>

#include "kimi/error.h"
#include "model/loader_io.h"
#include "text/chat_render.h"

namespace kimi::text {
namespace {

constexpr std::string_view kK3Tokens[] = {"<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"};
constexpr std::string_view kK2Tokens[] = {"<|im_user|>", "<|im_assistant|>", "<|im_middle|>", "<|im_end|>"};

std::string missing(const Tokenizer& tok, std::span<const std::string_view> names) {
  std::string out;
  for (std::string_view n : names)
    if (!tok.special_id(n)) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

std::string json_kind(const OrderedJson& v) {
  switch (v.type()) {
    case OrderedJson::value_t::object: return "an object";
    case OrderedJson::value_t::string: return "a string";
    case OrderedJson::value_t::boolean: return "a boolean";
    case OrderedJson::value_t::null: return "null";
    default: return "a number";
  }
}

// The request's "tools" as JSON (null when tools_json is empty).
OrderedJson parse_tools(const std::string& tools_json) {
  if (tools_json.empty()) return nullptr;
  OrderedJson tools;
  try {
    tools = OrderedJson::parse(tools_json);
  } catch (const OrderedJson::parse_error& e) {
    throw Error("render_chat: tools: expected a JSON array, got invalid JSON (" + std::string(e.what()) + ")");
  }
  if (!tools.is_array()) throw Error("render_chat: tools: expected a JSON array, got " + json_kind(tools));
  return tools;
}

void validate(const ChatRequest& r) {
  for (size_t i = 0; i < r.messages.size(); ++i) {
    const std::string& role = r.messages[i].role;
    if (role != "system" && role != "user" && role != "assistant" && role != "tool")
      throw Error("render_chat: messages[" + std::to_string(i) +
                  "].role: expected one of system, user, assistant, tool, got " + model::quote(role));
  }
  const std::string& e = r.thinking_effort;
  if (!e.empty() && e != "low" && e != "medium" && e != "high" && e != "max")
    throw Error("render_chat: thinking_effort: expected one of low, medium, high, max (or none), got " +
                model::quote(e));
}

}  // namespace

ChatFormat detect_chat_format(const Tokenizer& tok) {
  const std::string k3 = missing(tok, kK3Tokens);
  if (k3.empty()) return ChatFormat::kimi_k3;
  const std::string k2 = missing(tok, kK2Tokens);
  if (k2.empty()) return ChatFormat::kimi_k2;
  throw Error("chat format: expected the special tokens of kimi_k3 (<|open|>, <|close|>, <|sep|>, <|end_of_msg|>) "
              "or of kimi_k2 (<|im_user|>, <|im_assistant|>, <|im_middle|>, <|im_end|>), got a tokenizer without " +
              k3 + " (kimi_k3) and without " + k2 + " (kimi_k2)");
}

std::string_view to_string(ChatFormat f) { return f == ChatFormat::kimi_k3 ? "kimi_k3" : "kimi_k2"; }

std::vector<ChatSegment> render_chat(ChatFormat f, const ChatRequest& r) {
  validate(r);
  const OrderedJson tools = parse_tools(r.tools_json);
  return f == ChatFormat::kimi_k3 ? render_k3(r, tools) : render_k2(r, tools);
}

std::string to_text(std::span<const ChatSegment> s) {
  std::string out;
  for (const ChatSegment& seg : s) out += seg.text;
  return out;
}

std::vector<uint32_t> encode_chat(const Tokenizer& tok, std::span<const ChatSegment> s) {
  // Specials by their first byte, longest first, so that a scan tries few.
  std::vector<const SpecialToken*> specials;
  for (const SpecialToken& sp : tok.specials()) specials.push_back(&sp);
  std::sort(specials.begin(), specials.end(), [](const SpecialToken* a, const SpecialToken* b) {
    return a->text.size() > b->text.size();
  });
  std::vector<uint32_t> ids;
  std::string run;  // ordinary text since the last special token, across segments
  auto flush = [&] {
    if (run.empty()) return;
    const std::vector<uint32_t> part = tok.encode(run, AllowedSpecials::none());
    ids.insert(ids.end(), part.begin(), part.end());
    run.clear();
  };
  for (const ChatSegment& seg : s) {
    if (!seg.template_text) {
      run += seg.text;
      continue;
    }
    const std::string& t = seg.text;
    size_t i = 0;
    while (i < t.size()) {
      const SpecialToken* hit = nullptr;
      for (const SpecialToken* sp : specials)
        if (sp->text[0] == t[i] && t.compare(i, sp->text.size(), sp->text) == 0) {
          hit = sp;
          break;
        }
      if (hit) {
        flush();
        ids.push_back(hit->id);
        i += hit->text.size();
      } else {
        run += t[i++];
      }
    }
  }
  flush();
  return ids;
}

std::vector<uint32_t> stop_token_ids(ChatFormat f, const Tokenizer& tok) {
  std::vector<uint32_t> ids;
  for (std::string_view name : {f == ChatFormat::kimi_k3 ? "<|end_of_msg|>" : "<|im_end|>", "[EOS]"})
    if (auto id = tok.special_id(name)) ids.push_back(*id);
  return ids;
}

}  // namespace kimi::text
