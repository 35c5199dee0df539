// text/chat_parse.cpp: generated ids back into reasoning, content and tool calls (ChatOutputParser, chat.h).
//
// The parser works on text: each id's bytes (a special token's bytes are its name) are appended to a buffer that a
// state machine consumes, looking for the format's markers. Special tokens that are not markers of the format
// (<|im_end|>, [EOS], <|end_of_msg|>, ...) are dropped. A buffer tail that may be the start of a marker is held back
// until the next id decides it, and reasoning and content are emitted only as complete UTF-8 (a tail that later bytes
// may complete is held; invalid bytes become U+FFFD, one per maximal subpart; a marker ends any held sequence). So
// the deltas' concatenation equals the parse of the whole text at once, however the ids cut it.
//
// kimi_k2 (docs/text/chat.md): [<think>]REASONING</think>CONTENT, then tool calls
//   <|tool_calls_section_begin|>(<|tool_call_begin|>ID<|tool_call_argument_begin|>ARGS<|tool_call_end|>)*
//   <|tool_calls_section_end|>; ID is functions.NAME:IDX (NAME is the text between "functions." and the last ':').
//   <think> is recognized only at the start (after whitespace); a section may also open inside reasoning (it ends
//   the reasoning) and a call may come without its section markers.
// kimi_k3: blocks <|open|>TAG attrs<|sep|> ... <|close|>TAG<|sep|> under the assistant message the prompt opened:
//   think -> reasoning, response -> content, tools/call tool="NAME"/argument key="K" type="T" (or json) -> a call
//   whose arguments are the JSON object of its argument blocks (a string type's text as a JSON string, other types'
//   text parsed as JSON; written as Python's json.dumps writes it, like vLLM's kimi_k3 tool parser) or the json
//   block's text; its id is functions.NAME:IDX with IDX the call's number (from 0), K2's convention.
// A call is emitted whole, as one delta, once its end marker arrives and it is well formed (an id with a name,
// arguments that are JSON); a malformed or unterminated call degrades to content: its raw text, markers included.
#include <algorithm>
#include <array>
#include <optional>

#include <nlohmann/json.hpp>

#include "text/chat.h"
#include "text/chat_json.h"
#include "text/utf8.h"

namespace kimi::text {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kSectionBegin = "<|tool_calls_section_begin|>";
constexpr std::string_view kSectionBegin1 = "<|tool_call_section_begin|>";  // a spelling vLLM's parser also accepts
constexpr std::string_view kSectionEnd = "<|tool_calls_section_end|>";
constexpr std::string_view kSectionEnd1 = "<|tool_call_section_end|>";
constexpr std::string_view kCallBegin = "<|tool_call_begin|>";
constexpr std::string_view kArgBegin = "<|tool_call_argument_begin|>";
constexpr std::string_view kCallEnd = "<|tool_call_end|>";
constexpr std::array<std::string_view, 9> kK2Markers = {kThinkOpen,   kThinkClose, kSectionBegin,
                                                        kSectionBegin1, kSectionEnd, kSectionEnd1,
                                                        kCallBegin,   kArgBegin,   kCallEnd};

constexpr std::string_view kOpen = "<|open|>";
constexpr std::string_view kClose = "<|close|>";
constexpr std::string_view kSep = "<|sep|>";
constexpr std::array<std::string_view, 3> kK3Markers = {kOpen, kClose, kSep};

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ws(s.back())) s.remove_suffix(1);
  return s;
}

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence_length(s.substr(i));
    if (n == 0) return false;
    i += n;
  }
  return true;
}

// A JSON text's validity, without exceptions.
bool valid_json(std::string_view s) { return OrderedJson::accept(s); }

// K2's functions.NAME:IDX: the name, or nullopt when the id has none.
std::optional<std::string> k2_name_of(std::string_view id) {
  if (id.empty() || !valid_utf8(id)) return std::nullopt;
  std::string_view rest = id;
  if (rest.substr(0, 10) == "functions.") rest.remove_prefix(10);
  const size_t colon = rest.rfind(':');
  if (colon != std::string_view::npos) rest = rest.substr(0, colon);
  if (rest.empty()) return std::nullopt;
  return std::string(rest);
}

struct Attrs {
  std::string tag;
  std::vector<std::pair<std::string, std::string>> attrs;
  const std::string* get(std::string_view key) const {
    for (const auto& [k, v] : attrs)
      if (k == key) return &v;
    return nullptr;
  }
};

std::string unescape_attr(std::string_view v) {
  std::string out;
  for (size_t i = 0; i < v.size();) {
    if (v.substr(i, 6) == "&quot;") {
      out += '"', i += 6;
    } else if (v.substr(i, 5) == "&amp;") {
      out += '&', i += 5;
    } else {
      out += v[i++];
    }
  }
  return out;
}

// A K3 tag header "TAG key="v" key2="v2"" (the text between <|open|> and <|sep|>); nullopt when it is not one.
std::optional<Attrs> parse_header(std::string_view h) {
  Attrs a;
  size_t i = 0;
  while (i < h.size() && !is_ws(h[i])) ++i;
  a.tag = std::string(h.substr(0, i));
  if (a.tag.empty()) return std::nullopt;
  while (true) {
    while (i < h.size() && is_ws(h[i])) ++i;
    if (i == h.size()) return a;
    const size_t eq = h.find("=\"", i);
    if (eq == std::string_view::npos) return std::nullopt;
    const std::string_view key = h.substr(i, eq - i);
    if (key.empty() || std::any_of(key.begin(), key.end(), is_ws)) return std::nullopt;
    const size_t close = h.find('"', eq + 2);
    if (close == std::string_view::npos) return std::nullopt;
    a.attrs.emplace_back(std::string(key), unescape_attr(h.substr(eq + 2, close - eq - 2)));
    i = close + 1;
  }
}

}  // namespace

struct ChatOutputParser::Impl {
  enum class K2 { start, reasoning, content, section, call_id, call_args };

  ChatFormat format;
  const Tokenizer& tok;
  std::string buf;            // text not consumed yet
  ChatMessage msg;
  ChatDelta out;              // the delta being built by the current push/finish
  std::string pend_reasoning, pend_content;  // bytes of a character not complete yet
  std::string stray;          // text where only whitespace is expected, decided at the next marker or the end

  // K2
  K2 k2 = K2::start;
  bool in_section = false;    // inside <|tool_calls_section_begin|> ... <|tool_calls_section_end|>
  std::string call_raw, call_id, call_args;

  // K3: the open blocks, innermost last; header: inside <|open|>/<|close|> ... <|sep|>
  std::vector<std::string> stack;
  bool in_header = false, header_is_close = false;
  std::string header;
  bool in_call = false, call_ok = true;
  std::string call_tool, value_text, json_text;
  std::optional<Attrs> value_attrs;  // the argument block being read
  OrderedJson call_obj = OrderedJson::object();
  bool have_json_block = false;

  Impl(ChatFormat f, const Tokenizer& t, bool starts_in_thinking) : format(f), tok(t) {
    if (f == ChatFormat::kimi_k2) {
      k2 = starts_in_thinking ? K2::reasoning : K2::start;
    } else {
      stack = {"message", starts_in_thinking ? "think" : "response"};
    }
    msg.role = "assistant";
  }

  std::span<const std::string_view> markers() const {
    if (format == ChatFormat::kimi_k2) return kK2Markers;
    return kK3Markers;
  }
  bool is_marker(std::string_view s) const {
    for (std::string_view m : markers())
      if (m == s) return true;
    return false;
  }

  // --- output channels ------------------------------------------------------------------------------------------
  static void drain(std::string& pend, bool final, std::string& to_delta, std::string& to_msg) {
    size_t i = 0;
    std::string done;
    while (i < pend.size()) {
      const std::string_view rest = std::string_view(pend).substr(i);
      const size_t n = utf8_sequence_length(rest);
      if (n) {
        done.append(rest.substr(0, n));
        i += n;
      } else if (!final && utf8_incomplete_prefix(rest)) {
        break;
      } else {
        done += kReplacement;
        i += utf8_maximal_subpart(rest);
      }
    }
    pend.erase(0, i);
    to_delta += done;
    to_msg += done;
  }
  void reasoning(std::string_view s) {
    pend_reasoning += s;
    drain(pend_reasoning, false, out.reasoning, msg.reasoning);
  }
  void content(std::string_view s) {
    pend_content += s;
    drain(pend_content, false, out.content, msg.content);
  }
  // Text found where none belongs (between calls, outside the blocks) is content unless it is all whitespace.
  void flush_stray() {
    if (!trim(stray).empty()) content(stray);
    stray.clear();
  }
  void flush_pending() {
    drain(pend_reasoning, true, out.reasoning, msg.reasoning);
    drain(pend_content, true, out.content, msg.content);
  }
  void emit_call(std::string id, std::string name, std::string args) {
    const int index = int(msg.tool_calls.size());
    out.tool_calls.push_back({index, id, name, args});
    msg.tool_calls.push_back({std::move(id), std::move(name), std::move(args)});
  }

  // --- the buffer -------------------------------------------------------------------------------------------------
  // Consumes buf: text between markers goes to on_text, each marker to on_marker (which may return false to leave
  // it in the buffer for the new state). Without final, a tail that may begin a marker is held back.
  void run(bool final) {
    while (!buf.empty()) {
      if (format == ChatFormat::kimi_k2 && k2 == K2::start && !k2_start(final)) return;
      size_t best = std::string::npos;
      std::string_view hit;
      for (std::string_view m : markers()) {
        const size_t p = buf.find(m);
        if (p < best || (p == best && m.size() > hit.size())) best = p, hit = m;
      }
      if (best == std::string::npos) {
        size_t keep = 0;
        if (!final)
          for (std::string_view m : markers())
            for (size_t k = std::min(m.size() - 1, buf.size()); k > keep; --k)
              if (buf.compare(buf.size() - k, k, m, 0, k) == 0) {
                keep = k;
                break;
              }
        const std::string text = buf.substr(0, buf.size() - keep);
        buf.erase(0, buf.size() - keep);
        if (!text.empty()) on_text(text);
        return;
      }
      if (best > 0) {
        const std::string text = buf.substr(0, best);
        buf.erase(0, best);
        on_text(text);
        continue;  // the state may have changed (K2 start)
      }
      flush_stray();
      flush_pending();
      if (on_marker(hit)) buf.erase(0, hit.size());
    }
  }

  void on_text(std::string_view t) { format == ChatFormat::kimi_k2 ? k2_text(t) : k3_text(t); }
  bool on_marker(std::string_view m) { return format == ChatFormat::kimi_k2 ? k2_marker(m) : k3_marker(m); }

  // --- kimi_k2 ----------------------------------------------------------------------------------------------------
  // At the start: <think> after optional whitespace opens reasoning; anything else is content. False: wait.
  bool k2_start(bool final) {
    size_t ws = 0;
    while (ws < buf.size() && is_ws(buf[ws])) ++ws;
    const std::string_view rest = std::string_view(buf).substr(ws);
    if (rest.substr(0, kThinkOpen.size()) == kThinkOpen) {
      buf.erase(0, ws + kThinkOpen.size());
      k2 = K2::reasoning;
      return true;
    }
    if (!final && kThinkOpen.substr(0, rest.size()) == rest) return false;  // may still become <think>
    k2 = K2::content;
    return true;
  }

  void k2_degrade_call() {
    content(call_raw);
    call_raw.clear(), call_id.clear(), call_args.clear();
    k2 = in_section ? K2::section : K2::content;
  }

  void k2_text(std::string_view t) {
    switch (k2) {
      case K2::start:
      case K2::content: content(t); break;
      case K2::reasoning: reasoning(t); break;
      case K2::section: stray += t; break;
      case K2::call_id:
        call_raw += t, call_id += t;
        break;
      case K2::call_args:
        call_raw += t, call_args += t;
        break;
    }
  }

  bool k2_marker(std::string_view m) {
    const bool section_begin = m == kSectionBegin || m == kSectionBegin1;
    const bool section_end = m == kSectionEnd || m == kSectionEnd1;
    switch (k2) {
      case K2::start:
      case K2::reasoning:
      case K2::content:
        if (section_begin) {
          k2 = K2::section, in_section = true;
        } else if (m == kCallBegin) {
          k2 = K2::call_id, in_section = false, call_raw = m;
        } else if (k2 == K2::reasoning && m == kThinkClose) {
          k2 = K2::content;
        } else {
          k2_text(m);
        }
        return true;
      case K2::section:
        if (m == kCallBegin) {
          k2 = K2::call_id, call_raw = m;
        } else if (section_end) {
          k2 = K2::content, in_section = false;
        } else if (!section_begin) {
          content(m);
        }
        return true;
      case K2::call_id:
        if (m == kArgBegin) {
          call_raw += m;
          k2 = K2::call_args;
          return true;
        }
        k2_degrade_call();
        return false;  // the marker again, in the section or content state
      case K2::call_args:
        if (m == kCallEnd) {
          call_raw += m;
          const std::string id(trim(call_id));
          const std::string args(trim(call_args));
          const std::optional<std::string> name = k2_name_of(id);
          if (name && valid_json(args)) {
            emit_call(id, *name, args);
            call_raw.clear(), call_id.clear(), call_args.clear();
            k2 = in_section ? K2::section : K2::content;
          } else {
            k2_degrade_call();
          }
          return true;
        }
        if (m == kCallBegin || section_begin || section_end) {
          k2_degrade_call();
          return false;
        }
        call_raw += m, call_args += m;
        return true;
    }
    return true;
  }

  // --- kimi_k3 ----------------------------------------------------------------------------------------------------
  const std::string& top() const {
    static const std::string none;
    return stack.empty() ? none : stack.back();
  }

  void k3_degrade_call() {
    content(call_raw);
    call_raw.clear();
    in_call = false;
    while (!stack.empty() && stack.back() != "tools") stack.pop_back();
  }

  void k3_text(std::string_view t) {
    if (in_header) {
      header += t;
      if (in_call) call_raw += t;
      return;
    }
    const std::string& b = top();
    if (in_call) {
      call_raw += t;
      if (b == "argument") {
        value_text += t;
      } else if (b == "json") {
        json_text += t;
      } else if (!trim(t).empty()) {
        call_ok = false;  // stray text between argument blocks
      }
      return;
    }
    if (b == "think") {
      reasoning(t);
    } else if (b == "response") {
      content(t);
    } else {
      stray += t;  // text outside the blocks
    }
  }

  bool k3_marker(std::string_view m) {
    if (m == kSep) {
      if (!in_header) {
        k3_text(m);
        return true;
      }
      if (in_call) call_raw += m;
      in_header = false;
      k3_tag(header_is_close, header);
      return true;
    }
    // <|open|> or <|close|>
    if (in_header) {  // a header that never reached <|sep|>: its text is literal
      in_header = false;
      const std::string raw = std::string(header_is_close ? kClose : kOpen) + header;
      if (in_call)
        call_ok = false;
      else
        k3_text(raw);
    }
    in_header = true, header_is_close = m == kClose, header.clear();
    if (in_call) call_raw += m;
    return true;
  }

  void k3_literal_tag(bool is_close, const std::string& h) {
    const std::string raw = std::string(is_close ? kClose : kOpen) + h + std::string(kSep);
    if (in_call) {
      call_ok = false;
      return;
    }
    k3_text(raw);
  }

  void k3_tag(bool is_close, const std::string& h) {
    const std::optional<Attrs> a = parse_header(h);
    if (!a) return k3_literal_tag(is_close, h);
    const std::string& b = top();
    if (!is_close) {
      const std::string& t = a->tag;
      if ((b == "message" || b.empty()) && (t == "think" || t == "response" || t == "tools")) {
        stack.push_back(t);
      } else if (b == "tools" && t == "call") {
        in_call = true, call_ok = true;
        call_raw = std::string(kOpen) + h + std::string(kSep);
        call_obj = OrderedJson::object(), have_json_block = false, json_text.clear();
        const std::string* tool = a->get("tool");
        call_tool = tool ? *tool : "";
        if (call_tool.empty() || !valid_utf8(call_tool)) call_ok = false;
        stack.push_back(t);
      } else if (b == "call" && (t == "argument" || t == "json")) {
        if (t == "argument") value_attrs = a, value_text.clear();
        stack.push_back(t);
      } else {
        k3_literal_tag(false, h);
      }
      return;
    }
    const auto it = std::find(stack.rbegin(), stack.rend(), a->tag);
    if (it == stack.rend() || !a->attrs.empty()) return k3_literal_tag(true, h);
    if (a->tag != b) {  // closing an outer block: what is open inside it is cut short
      if (in_call) {
        k3_degrade_call();
        if (a->tag == "call" || a->tag == "argument" || a->tag == "json") return;
      }
      while (!stack.empty() && stack.back() != a->tag) stack.pop_back();
    }
    if (stack.empty()) return;
    const std::string closed = stack.back();
    stack.pop_back();
    if (closed == "argument") {
      k3_argument();
    } else if (closed == "json") {
      have_json_block = true;
    } else if (closed == "call") {
      k3_call();
    }
  }

  void k3_argument() {
    const std::string* key = value_attrs ? value_attrs->get("key") : nullptr;
    const std::string* type = value_attrs ? value_attrs->get("type") : nullptr;
    if (!key || !valid_utf8(*key) || !valid_utf8(value_text)) {
      call_ok = false;
      return;
    }
    if (!type || *type == "string") {
      call_obj[*key] = value_text;
      return;
    }
    const OrderedJson v = OrderedJson::parse(trim(value_text), nullptr, false);
    const bool ok = !v.is_discarded() &&
                    ((*type == "number" && v.is_number()) || (*type == "boolean" && v.is_boolean()) ||
                     (*type == "null" && v.is_null()) || (*type == "object" && v.is_object()) ||
                     (*type == "array" && v.is_array()));
    if (!ok) {
      call_ok = false;
      return;
    }
    call_obj[*key] = v;
  }

  void k3_call() {
    std::string args;
    if (have_json_block) {
      args = std::string(trim(json_text));
      if (!call_obj.empty() || !valid_json(args)) call_ok = false;
    } else {
      args = python_json_dumps(call_obj, {});  // json.dumps(arguments, ensure_ascii=False), as vLLM's parser
    }
    if (call_ok) {
      const std::string id = "functions." + call_tool + ":" + std::to_string(msg.tool_calls.size());
      emit_call(id, call_tool, args);
      call_raw.clear();
      in_call = false;
    } else {
      k3_degrade_call();
    }
  }

  void finish_k3() {
    if (in_header) {
      in_header = false;
      const std::string raw = std::string(header_is_close ? kClose : kOpen) + header;
      if (in_call)
        call_ok = false;
      else
        k3_text(raw);
    }
    if (in_call) k3_degrade_call();
  }

  // --- entry points -------------------------------------------------------------------------------------------------
  void feed(std::string_view bytes) {
    buf += bytes;
    run(false);
  }
  void finish() {
    run(true);
    flush_stray();
    if (format == ChatFormat::kimi_k2) {
      if (k2 == K2::call_id || k2 == K2::call_args) k2_degrade_call();
    } else {
      finish_k3();
    }
    flush_pending();
  }
  // The bytes id contributes: none for a special token that is not a marker of the format.
  std::string_view bytes_of(uint32_t id) const {
    const std::string& b = tok.token_bytes(id);
    if (tok.is_special(id) && !is_marker(b)) return {};
    return b;
  }
};

ChatOutputParser::ChatOutputParser(ChatFormat f, const Tokenizer& tok, bool starts_in_thinking)
    : impl_(std::make_unique<Impl>(f, tok, starts_in_thinking)) {}
ChatOutputParser::~ChatOutputParser() = default;
ChatOutputParser::ChatOutputParser(ChatOutputParser&&) noexcept = default;
ChatOutputParser& ChatOutputParser::operator=(ChatOutputParser&&) noexcept = default;

ChatDelta ChatOutputParser::push(uint32_t id) {
  impl_->out = {};
  impl_->feed(impl_->bytes_of(id));
  return std::move(impl_->out);
}

ChatDelta ChatOutputParser::finish() {
  impl_->out = {};
  impl_->finish();
  return std::move(impl_->out);
}

const ChatMessage& ChatOutputParser::message() const { return impl_->msg; }

ChatMessage ChatOutputParser::parse(ChatFormat f, const Tokenizer& tok, std::span<const uint32_t> ids,
                                    bool starts_in_thinking) {
  Impl p(f, tok, starts_in_thinking);
  std::string text;
  for (uint32_t id : ids) text += p.bytes_of(id);
  p.feed(text);
  p.finish();
  return std::move(p.msg);
}

}  // namespace kimi::text
