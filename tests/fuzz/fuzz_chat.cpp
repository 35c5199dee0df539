// libFuzzer target: the chat output parser and the chat renderer (src/text/chat.h) on arbitrary input.
//
// Input byte 0 picks the mode; bit 7 set: render. The rest is a JSON request {"messages": [{"role",
// "content", "reasoning", "name", "tool_call_id", "tool_calls": [{"id", "name", "arguments"}]}], "tools":
// <any JSON>, "thinking": bool, "thinking_effort": string, "add_generation_prompt": bool} rendered in both
// formats; a kimi::Error is an accepted answer; otherwise the encoded ids must decode to the rendered text.
// Bit 7 clear: parse. Bit 0 picks the format, bit 1 starts_in_thinking; the rest are ids of a byte-level
// tokenizer with both formats' specials: 0xFF followed by k is special k, any other byte its byte token. The
// streamed deltas must concatenate to the whole parse and be valid UTF-8.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kimi/error.h"
#include "text/chat.h"
#include "text/utf8.h"

namespace {

using namespace kimi::text;

const Tokenizer& tokenizer() {
  static const Tokenizer tok = [] {
    std::vector<std::string> by_rank;
    for (int b = 0; b < 256; ++b) by_rank.emplace_back(1, char(b));
    const char* names[] = {"[BOS]",
                           "[EOS]",
                           "<|im_end|>",
                           "<|im_user|>",
                           "<|im_assistant|>",
                           "<|im_system|>",
                           "<|im_middle|>",
                           "<|tool_calls_section_begin|>",
                           "<|tool_calls_section_end|>",
                           "<|tool_call_begin|>",
                           "<|tool_call_argument_begin|>",
                           "<|tool_call_end|>",
                           "<think>",
                           "</think>",
                           "<|open|>",
                           "<|close|>",
                           "<|sep|>",
                           "<|end_of_msg|>"};
    std::vector<SpecialToken> specials;
    for (const char* n : names) specials.push_back({n, uint32_t(256 + specials.size())});
    return Tokenizer(std::move(by_rank), std::move(specials));
  }();
  return tok;
}

void check(bool ok) {
  if (!ok) std::abort();
}

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence_length(std::string_view(s).substr(i));
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string str(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

void fuzz_render(const uint8_t* data, size_t size) {
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (!j.is_object()) return;
  ChatRequest r;
  if (auto m = j.find("messages"); m != j.end() && m->is_array()) {
    for (const auto& e : *m) {
      if (!e.is_object()) continue;
      ChatMessage msg{str(e, "role"),         str(e, "content"), str(e, "reasoning"), {},
                      str(e, "tool_call_id"), str(e, "name")};
      if (auto t = e.find("tool_calls"); t != e.end() && t->is_array())
        for (const auto& c : *t)
          if (c.is_object()) msg.tool_calls.push_back({str(c, "id"), str(c, "name"), str(c, "arguments")});
      r.messages.push_back(std::move(msg));
    }
  }
  if (auto t = j.find("tools"); t != j.end()) r.tools_json = t->dump();
  r.thinking = j.value("thinking", true);
  r.add_generation_prompt = j.value("add_generation_prompt", true);
  r.thinking_effort = str(j, "thinking_effort");
  for (ChatFormat f : {ChatFormat::kimi_k2, ChatFormat::kimi_k3}) {
    std::vector<ChatSegment> segs;
    try {
      segs = render_chat(f, r);
    } catch (const kimi::Error&) {
      continue;
    }
    const std::string text = to_text(segs);
    std::vector<uint32_t> ids;
    try {
      ids = encode_chat(tokenizer(), segs);  // invalid UTF-8 in the request's strings is refused here
    } catch (const kimi::Error&) {
      continue;
    }
    check(tokenizer().decode(ids) == text);
  }
}

void fuzz_parse(uint8_t mode, const uint8_t* data, size_t size) {
  const Tokenizer& tok = tokenizer();
  const ChatFormat f = mode & 1 ? ChatFormat::kimi_k3 : ChatFormat::kimi_k2;
  const bool thinking = mode & 2;
  std::vector<uint32_t> ids;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0xFF && i + 1 < size) {
      ids.push_back(256 + data[++i] % uint32_t(tok.specials().size()));
    } else {
      ids.push_back(data[i]);
    }
  }
  const ChatMessage whole = ChatOutputParser::parse(f, tok, ids, thinking);
  ChatOutputParser p(f, tok, thinking);
  ChatMessage joined;
  auto add = [&](const ChatDelta& d) {
    check(valid_utf8(d.reasoning) && valid_utf8(d.content));
    joined.reasoning += d.reasoning;
    joined.content += d.content;
    for (const ToolCallDelta& t : d.tool_calls) {
      check(size_t(t.index) == joined.tool_calls.size());
      joined.tool_calls.push_back({t.id, t.name, t.arguments});
    }
  };
  for (uint32_t id : ids) add(p.push(id));
  add(p.finish());
  check(joined.reasoning == whole.reasoning && joined.content == whole.content);
  check(joined.tool_calls.size() == whole.tool_calls.size());
  for (size_t i = 0; i < whole.tool_calls.size(); ++i) {
    check(joined.tool_calls[i].id == whole.tool_calls[i].id &&
          joined.tool_calls[i].name == whole.tool_calls[i].name &&
          joined.tool_calls[i].arguments == whole.tool_calls[i].arguments);
    check(nlohmann::json::accept(whole.tool_calls[i].arguments));
  }
  check(p.message().content == whole.content && p.message().reasoning == whole.reasoning);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] & 0x80)
    fuzz_render(data + 1, size - 1);
  else
    fuzz_parse(data[0], data + 1, size - 1);
  return 0;
}
