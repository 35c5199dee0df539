// The chat formats (text/chat.h): format detection, request errors, segments and encoding, stop tokens, and the
// output parser on whole and streamed ids (split characters, split markers, malformed tool calls).
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "expect_error.h"
#include "text/chat.h"
#include "text/utf8.h"
#include "text/vocab_files.h"

namespace kimi::text {
namespace {

const std::string kTrained = std::string(KIMI_FIXTURES_DIR) + "/text/trained";

std::vector<std::string> trained_ranks() {
  Ranks ranks;
  std::vector<std::string> by_rank;
  load_tiktoken_model(kTrained + "/tiktoken.model", ranks, by_rank);
  return by_rank;
}

// The trained fixture's ranks with the given specials (ids N, N+1, ...).
Tokenizer with_specials(const std::vector<std::string>& names) {
  std::vector<std::string> by_rank = trained_ranks();
  std::vector<SpecialToken> specials;
  for (size_t i = 0; i < names.size(); ++i) specials.push_back({names[i], uint32_t(by_rank.size() + i)});
  return Tokenizer(std::move(by_rank), std::move(specials));
}

const Tokenizer& k2_tok() {  // K2's chat and tool-call specials, <think> / </think> as specials too
  static const Tokenizer t = with_specials(
      {"[BOS]", "[EOS]", "<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|im_system|>", "<|im_middle|>",
       "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
       "<|tool_call_argument_begin|>", "<|tool_call_end|>", "<think>", "</think>"});
  return t;
}
const Tokenizer& k2_text_markers_tok() {  // the trained fixture as shipped: chat specials, tool-call markers as text
  static const Tokenizer t = Tokenizer::load(kTrained);
  return t;
}
const Tokenizer& k3_tok() {
  static const Tokenizer t = with_specials({"[BOS]", "[EOS]", "<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"});
  return t;
}

// One id per byte (the single-byte ranks): every marker and character cut into pieces.
// (Every tokenizer here has the trained fixture's ranks.)
std::vector<uint32_t> byte_ids(const Tokenizer&, std::string_view s) {
  static const std::vector<uint32_t> rank_of_byte = [] {
    std::vector<uint32_t> r(256);
    const std::vector<std::string> by_rank = trained_ranks();
    for (uint32_t i = 0; i < by_rank.size(); ++i)
      if (by_rank[i].size() == 1) r[uint8_t(by_rank[i][0])] = i;
    return r;
  }();
  std::vector<uint32_t> ids;
  for (char c : s) ids.push_back(rank_of_byte[uint8_t(c)]);
  return ids;
}

struct Streamed {
  ChatMessage joined;  // the deltas concatenated
  ChatMessage message;  // message() at the end
};
Streamed stream(ChatFormat f, const Tokenizer& tok, std::span<const uint32_t> ids, bool thinking) {
  ChatOutputParser p(f, tok, thinking);
  Streamed s;
  auto add = [&](const ChatDelta& d) {
    const Decoded r = decode_utf8(d.reasoning, "delta reasoning");  // throws on invalid UTF-8
    const Decoded c = decode_utf8(d.content, "delta content");
    (void)r, (void)c;
    s.joined.reasoning += d.reasoning;
    s.joined.content += d.content;
    for (const ToolCallDelta& t : d.tool_calls) {
      EXPECT_EQ(size_t(t.index), s.joined.tool_calls.size());
      s.joined.tool_calls.push_back({t.id, t.name, t.arguments});
    }
  };
  for (uint32_t id : ids) add(p.push(id));
  add(p.finish());
  s.message = p.message();
  return s;
}

void expect_same(const ChatMessage& a, const ChatMessage& b) {
  EXPECT_EQ(a.reasoning, b.reasoning);
  EXPECT_EQ(a.content, b.content);
  ASSERT_EQ(a.tool_calls.size(), b.tool_calls.size());
  for (size_t i = 0; i < a.tool_calls.size(); ++i) {
    EXPECT_EQ(a.tool_calls[i].id, b.tool_calls[i].id);
    EXPECT_EQ(a.tool_calls[i].name, b.tool_calls[i].name);
    EXPECT_EQ(a.tool_calls[i].arguments, b.tool_calls[i].arguments);
  }
}

// Parses ids whole, streamed one id at a time, and streamed one byte at a time; all must agree. Returns the parse.
ChatMessage parse_all_ways(ChatFormat f, const Tokenizer& tok, const std::string& text, bool thinking) {
  const std::vector<uint32_t> ids = tok.encode(text, AllowedSpecials::all());
  const ChatMessage whole = ChatOutputParser::parse(f, tok, ids, thinking);
  const Streamed s = stream(f, tok, ids, thinking);
  expect_same(s.joined, whole);
  expect_same(s.message, whole);
  EXPECT_EQ(s.message.role, "assistant");
  // Markers that are text in this tokenizer's view (byte ids) must parse the same where they are not specials.
  bool all_text = true;
  for (uint32_t id : ids) all_text = all_text && !tok.is_special(id);
  if (all_text) expect_same(stream(f, tok, byte_ids(tok, text), thinking).joined, whole);
  return whole;
}

ChatMessage user(std::string c) { return {"user", std::move(c), "", {}, "", ""}; }

// --- detection, errors, segments ---------------------------------------------------------------------------------

TEST(Chat, DetectFormat) {
  EXPECT_EQ(detect_chat_format(k2_text_markers_tok()), ChatFormat::kimi_k2);
  EXPECT_EQ(detect_chat_format(k2_tok()), ChatFormat::kimi_k2);
  EXPECT_EQ(detect_chat_format(k3_tok()), ChatFormat::kimi_k3);
  EXPECT_EQ(to_string(ChatFormat::kimi_k2), "kimi_k2");
  EXPECT_EQ(to_string(ChatFormat::kimi_k3), "kimi_k3");
  const Tokenizer partial = with_specials({"<|im_user|>", "<|im_end|>", "<|open|>", "<|sep|>"});
  EXPECT_EQ(testutil::error_message_of([&] { detect_chat_format(partial); }),
            "chat format: expected the special tokens of kimi_k3 (<|open|>, <|close|>, <|sep|>, <|end_of_msg|>) or "
            "of kimi_k2 (<|im_user|>, <|im_assistant|>, <|im_middle|>, <|im_end|>), got a tokenizer without "
            "<|close|>, <|end_of_msg|> (kimi_k3) and without <|im_assistant|>, <|im_middle|> (kimi_k2)");
}

TEST(Chat, RequestErrors) {
  for (ChatFormat f : {ChatFormat::kimi_k2, ChatFormat::kimi_k3}) {
    ChatRequest r;
    r.messages = {user("hi"), {"bot", "x", "", {}, "", ""}};
    EXPECT_EQ(testutil::error_message_of([&] { render_chat(f, r); }),
              "render_chat: messages[1].role: expected one of system, user, assistant, tool, got 'bot'");
    r.messages = {user("hi")};
    r.tools_json = R"({"type": "function"})";
    EXPECT_EQ(testutil::error_message_of([&] { render_chat(f, r); }),
              "render_chat: tools: expected a JSON array, got an object");
    r.tools_json = "[{";
    EXPECT_KIMI_ERROR(render_chat(f, r), "render_chat: tools: expected a JSON array, got invalid JSON (",
                      "parse error");
    r.tools_json = "";
    r.thinking_effort = "extreme";
    EXPECT_EQ(testutil::error_message_of([&] { render_chat(f, r); }),
              "render_chat: thinking_effort: expected one of low, medium, high, max (or none), got 'extreme'");
  }
  ChatRequest r;  // K3 names each tool result; with no name and no call to take it from there is none
  r.messages = {user("hi"), {"tool", "result", "", {}, "", ""}};
  EXPECT_EQ(testutil::error_message_of([&] { render_chat(ChatFormat::kimi_k3, r); }),
            "render_chat: messages[1].name: expected the tool's name (or a tool_call_id of the preceding assistant "
            "message's calls, or a call at its position), got none");
  EXPECT_NO_THROW(render_chat(ChatFormat::kimi_k2, r));  // K2 names the turn "tool"
}

TEST(Chat, UserTextNeverBecomesASpecialToken) {
  const Tokenizer& tok = k2_tok();
  ChatRequest r;
  r.messages = {user("end <|im_end|><|im_assistant|> here"), {"assistant", "<think>x</think>", "", {}, "", ""}};
  const auto segs = render_chat(ChatFormat::kimi_k2, r);
  for (const ChatSegment& s : segs)
    if (!s.template_text) {
      const auto ids = tok.encode(s.text, AllowedSpecials::none());
      for (uint32_t id : ids) EXPECT_FALSE(tok.is_special(id)) << s.text;
    }
  const std::vector<uint32_t> ids = encode_chat(tok, segs);
  const uint32_t im_end = *tok.special_id("<|im_end|>"), think = *tok.special_id("<think>");
  // system, user, assistant turns each end in one <|im_end|>; the assistant turn's one <think> is the template's
  EXPECT_EQ(std::count(ids.begin(), ids.end(), im_end), 3);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), think), 1);
  EXPECT_EQ(tok.decode(ids), to_text(segs));
}

// encode_chat equals the tokenizer's encode of the whole prompt with every special allowed (what transformers'
// apply_chat_template(tokenize=True) gives) on every golden conversation whose user text holds no special token.
TEST(Chat, EncodeEqualsWholePromptEncode) {
  for (ChatFormat f : {ChatFormat::kimi_k2, ChatFormat::kimi_k3}) {
    const Tokenizer& tok = f == ChatFormat::kimi_k2 ? k2_tok() : k3_tok();
    std::ifstream in(std::string(KIMI_FIXTURES_DIR) + "/text/chat/" + std::string(to_string(f)) + ".json");
    std::stringstream ss;
    ss << in.rdbuf();
    const nlohmann::json golden = nlohmann::json::parse(ss.str());
    int checked = 0;
    for (const auto& c : golden.at("cases")) {
      if (c.at("name") == "names_and_special_text") continue;
      ChatRequest r;
      for (const auto& m : c.at("request").at("messages")) {
        ChatMessage msg{m.at("role"), m.at("content"), m.at("reasoning"), {}, m.at("tool_call_id"), m.at("name")};
        for (const auto& t : m.at("tool_calls"))
          msg.tool_calls.push_back({t.at("id"), t.at("name"), t.at("arguments")});
        r.messages.push_back(msg);
      }
      r.tools_json = c.at("request").at("tools_json");
      r.thinking = c.at("request").at("thinking");
      r.thinking_effort = c.at("request").at("thinking_effort");
      r.add_generation_prompt = c.at("request").at("add_generation_prompt");
      const auto segs = render_chat(f, r);
      EXPECT_EQ(encode_chat(tok, segs), tok.encode(to_text(segs), AllowedSpecials::all())) << c.at("name");
      ++checked;
    }
    EXPECT_GE(checked, 10);
  }
}

TEST(Chat, StopTokens) {
  EXPECT_EQ(stop_token_ids(ChatFormat::kimi_k2, k2_tok()),
            (std::vector<uint32_t>{*k2_tok().special_id("<|im_end|>"), *k2_tok().special_id("[EOS]")}));
  EXPECT_EQ(stop_token_ids(ChatFormat::kimi_k3, k3_tok()),
            (std::vector<uint32_t>{*k3_tok().special_id("<|end_of_msg|>"), *k3_tok().special_id("[EOS]")}));
}

// --- the K2 output parser ------------------------------------------------------------------------------------------

TEST(ChatParseK2, ReasoningContentAndToolCalls) {
  const std::string out =
      "<think>Paris: use the tool. é😀</think>Let me check.<|tool_calls_section_begin|>\n<|tool_call_begin|> "
      "functions.get_weather:0 <|tool_call_argument_begin|>{\"city\": \"Paris\"}\n<|tool_call_end|>"
      "<|tool_call_begin|>functions.web.search:1<|tool_call_argument_begin|>{}<|tool_call_end|>"
      "<|tool_calls_section_end|><|im_end|>";
  for (const Tokenizer* tok : {&k2_tok(), &k2_text_markers_tok()}) {
    const ChatMessage m = parse_all_ways(ChatFormat::kimi_k2, *tok, out, false);
    EXPECT_EQ(m.reasoning, "Paris: use the tool. é😀");
    EXPECT_EQ(m.content, "Let me check.");
    ASSERT_EQ(m.tool_calls.size(), 2u);
    EXPECT_EQ(m.tool_calls[0].id, "functions.get_weather:0");
    EXPECT_EQ(m.tool_calls[0].name, "get_weather");
    EXPECT_EQ(m.tool_calls[0].arguments, "{\"city\": \"Paris\"}");
    EXPECT_EQ(m.tool_calls[1].id, "functions.web.search:1");
    EXPECT_EQ(m.tool_calls[1].name, "web.search");
    EXPECT_EQ(m.tool_calls[1].arguments, "{}");
  }
}

TEST(ChatParseK2, NoThinkingAndLeadingText) {
  const ChatMessage plain = parse_all_ways(ChatFormat::kimi_k2, k2_tok(), "  Hello <think> world</think>", false);
  EXPECT_EQ(plain.reasoning, "");
  EXPECT_EQ(plain.content, "  Hello <think> world</think>");
  const ChatMessage lead = parse_all_ways(ChatFormat::kimi_k2, k2_tok(), "\n<think>r</think>c", false);
  EXPECT_EQ(lead.reasoning, "r");
  EXPECT_EQ(lead.content, "c");
  // the prompt opened the block: the text is reasoning until </think>
  const ChatMessage opened = parse_all_ways(ChatFormat::kimi_k2, k2_tok(), "r1</think>c1", true);
  EXPECT_EQ(opened.reasoning, "r1");
  EXPECT_EQ(opened.content, "c1");
  const ChatMessage cut = parse_all_ways(ChatFormat::kimi_k2, k2_tok(), "<think>unfinished", false);
  EXPECT_EQ(cut.reasoning, "unfinished");
  EXPECT_EQ(cut.content, "");
  const ChatMessage partial = parse_all_ways(ChatFormat::kimi_k2, k2_text_markers_tok(), "<thi", false);
  EXPECT_EQ(partial.content, "<thi");
}

TEST(ChatParseK2, SplitUtf8AcrossIds) {
  const Tokenizer& tok = k2_tok();
  const std::string text = "<think>é😀</think>日本 ✓";
  std::vector<uint32_t> ids = {*tok.special_id("<think>")};
  for (uint32_t id : byte_ids(tok, "é😀")) ids.push_back(id);
  ids.push_back(*tok.special_id("</think>"));
  for (uint32_t id : byte_ids(tok, "日本 ✓")) ids.push_back(id);
  ChatOutputParser p(ChatFormat::kimi_k2, tok, false);
  std::vector<std::string> pieces;
  for (uint32_t id : ids) {
    const ChatDelta d = p.push(id);
    pieces.push_back(d.reasoning + "|" + d.content);
  }
  // "é" is two bytes, "😀" four: nothing comes out until each character is complete
  EXPECT_EQ(pieces[1], "|");
  EXPECT_EQ(pieces[2], "é|");
  EXPECT_EQ(pieces[3], "|");
  EXPECT_EQ(pieces[5], "|");
  EXPECT_EQ(pieces[6], "😀|");
  EXPECT_TRUE(p.finish().empty());
  EXPECT_EQ(p.message().reasoning, "é😀");
  EXPECT_EQ(p.message().content, "日本 ✓");
  // a character cut off by the end: its bytes become one U+FFFD at finish
  ChatOutputParser q(ChatFormat::kimi_k2, tok, false);
  const std::vector<uint32_t> cut = byte_ids(tok, "a\xF0\x9F\x98");
  for (uint32_t id : cut) q.push(id);
  EXPECT_EQ(q.finish().content, "\xEF\xBF\xBD");
  EXPECT_EQ(q.message().content, "a\xEF\xBF\xBD");
}

TEST(ChatParseK2, MalformedToolCallsDegradeToContent) {
  struct Case {
    std::string out, content;
    size_t calls;
  };
  const std::vector<Case> cases = {
      // unterminated arguments
      {"Hi<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{\"a\": 1",
       "Hi<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{\"a\": 1", 0},
      // bad JSON, then a good call
      {"<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{bad}"
       "<|tool_call_end|><|tool_call_begin|>functions.g:1<|tool_call_argument_begin|>{\"x\":[1]}<|tool_call_end|>"
       "<|tool_calls_section_end|>after",
       "<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{bad}<|tool_call_end|>after", 1},
      // no argument marker: the call ends at the next call's begin
      {"<|tool_call_begin|>functions.f:0{}<|tool_call_end|>x", "<|tool_call_begin|>functions.f:0{}<|tool_call_end|>x",
       0},
      // an id without a name
      {"<|tool_call_begin|>:0<|tool_call_argument_begin|>{}<|tool_call_end|>",
       "<|tool_call_begin|>:0<|tool_call_argument_begin|>{}<|tool_call_end|>", 0},
      // stray text inside the section is content; whitespace there is not
      {"<|tool_calls_section_begin|> \n junk <|tool_calls_section_end|>", " \n junk ", 0},
      // a section that never ends, a call id that never gets arguments
      {"<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0", "<|tool_call_begin|>functions.f:0", 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.out);
    for (const Tokenizer* tok : {&k2_tok(), &k2_text_markers_tok()}) {
      const ChatMessage m = parse_all_ways(ChatFormat::kimi_k2, *tok, c.out, false);
      EXPECT_EQ(m.content, c.content);
      EXPECT_EQ(m.tool_calls.size(), c.calls);
    }
  }
}

// What the renderer writes for an assistant turn parses back to the same message.
TEST(ChatParseK2, RoundTripsTheRenderedTurn) {
  ChatMessage a{"assistant", "Two calls.", "Need both.",
                {{"functions.get_weather:0", "get_weather", "{\"city\":\"Paris\"}"},
                 {"functions.search:1", "search", "{\"q\": \"x ✓\"}"}}, "", ""};
  ChatRequest r;
  r.messages = {user("q"), a};
  r.add_generation_prompt = false;
  const std::string text = to_text(render_chat(ChatFormat::kimi_k2, r));
  const std::string head = "<|im_assistant|>assistant<|im_middle|>";
  const std::string turn = text.substr(text.rfind(head) + head.size());
  const ChatMessage m = parse_all_ways(ChatFormat::kimi_k2, k2_tok(), turn, false);
  EXPECT_EQ(m.reasoning, a.reasoning);
  EXPECT_EQ(m.content, a.content);
  ASSERT_EQ(m.tool_calls.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(m.tool_calls[i].id, a.tool_calls[i].id);
    EXPECT_EQ(m.tool_calls[i].name, a.tool_calls[i].name);
    EXPECT_EQ(m.tool_calls[i].arguments, a.tool_calls[i].arguments);
  }
}

// --- the K3 output parser ------------------------------------------------------------------------------------------

const std::string kK3Out =
    "Plan: weather. é<|close|>think<|sep|><|open|>response<|sep|>Checking 😀<|close|>response<|sep|>"
    "<|open|>tools<|sep|><|open|>call tool=\"get_weather\" index=\"1\"<|sep|>"
    "<|open|>argument key=\"city\" type=\"string\"<|sep|>Paris &amp; \"x\"<|close|>argument<|sep|>"
    "<|open|>argument key=\"days\" type=\"number\"<|sep|>3<|close|>argument<|sep|>"
    "<|open|>argument key=\"opts\" type=\"object\"<|sep|>{\"a\": [1, true, null]}<|close|>argument<|sep|>"
    "<|close|>call<|sep|><|open|>call tool=\"a&quot;b\" index=\"2\"<|sep|><|open|>json type=\"object\"<|sep|>"
    "{\"q\": 1}<|close|>json<|sep|><|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>";

TEST(ChatParseK3, ThinkResponseAndCalls) {
  const ChatMessage m = parse_all_ways(ChatFormat::kimi_k3, k3_tok(), kK3Out, true);
  EXPECT_EQ(m.reasoning, "Plan: weather. é");
  EXPECT_EQ(m.content, "Checking 😀");
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(m.tool_calls[0].id, "functions.get_weather:0");
  EXPECT_EQ(m.tool_calls[0].name, "get_weather");
  EXPECT_EQ(m.tool_calls[0].arguments,
            R"({"city": "Paris &amp; \"x\"", "days": 3, "opts": {"a": [1, true, null]}})");
  EXPECT_EQ(m.tool_calls[1].id, "functions.a\"b:1");
  EXPECT_EQ(m.tool_calls[1].name, "a\"b");
  EXPECT_EQ(m.tool_calls[1].arguments, "{\"q\": 1}");
  // every byte its own id: the markers are specials, so split only the text between them
  const Tokenizer& tok = k3_tok();
  const std::vector<uint32_t> ids = tok.encode(kK3Out, AllowedSpecials::all());
  std::vector<uint32_t> split;
  for (uint32_t id : ids) {
    if (tok.is_special(id)) {
      split.push_back(id);
    } else {
      for (uint32_t b : byte_ids(tok, tok.token_bytes(id))) split.push_back(b);
    }
  }
  expect_same(stream(ChatFormat::kimi_k3, tok, split, true).joined, m);
}

TEST(ChatParseK3, ThinkingOffStartsInResponse) {
  const ChatMessage m =
      parse_all_ways(ChatFormat::kimi_k3, k3_tok(), "Hi<|close|>response<|sep|><|close|>message<|sep|>", false);
  EXPECT_EQ(m.reasoning, "");
  EXPECT_EQ(m.content, "Hi");
}

TEST(ChatParseK3, MalformedCallsDegradeToContent) {
  const std::string call =
      "<|open|>call tool=\"f\" index=\"1\"<|sep|><|open|>argument key=\"n\" type=\"number\"<|sep|>";
  struct Case {
    std::string out, content;
    size_t calls;
  };
  const std::vector<Case> cases = {
      {"<|open|>tools<|sep|>" + call + "abc<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>",
       call + "abc<|close|>argument<|sep|><|close|>call<|sep|>", 0},  // not a number
      {"<|open|>tools<|sep|>" + call + "12", call + "12", 0},         // unterminated
      {"<|open|>tools<|sep|><|open|>call index=\"1\"<|sep|><|close|>call<|sep|>",
       "<|open|>call index=\"1\"<|sep|><|close|>call<|sep|>", 0},     // no tool name
      {"<|open|>tools<|sep|>" + call + "1<|close|>call<|sep|>x", call + "1<|close|>call<|sep|>x", 0},  // cut short
      {"<|open|>tools<|sep|><|open|>call tool=\"g\"<|sep|><|open|>json type=\"object\"<|sep|>{bad<|close|>json<|sep|>"
       "<|close|>call<|sep|>",
       "<|open|>call tool=\"g\"<|sep|><|open|>json type=\"object\"<|sep|>{bad<|close|>json<|sep|>"
       "<|close|>call<|sep|>",
       0},
      {"<|open|>weird<|sep|>a<|close|>nothing<|sep|>b<|sep|>",
       "<|open|>weird<|sep|>a<|close|>nothing<|sep|>b<|sep|>", 0},  // unknown blocks are text
      {"<|open|>tools<|sep|><|open|>call tool=\"h\"<|sep|><|close|>call<|sep|>", "", 1},  // no arguments: {}
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.out);
    const ChatMessage m =
        parse_all_ways(ChatFormat::kimi_k3, k3_tok(), "<|close|>response<|sep|>" + c.out, false);
    EXPECT_EQ(m.content, c.content);
    EXPECT_EQ(m.tool_calls.size(), c.calls);
    if (c.calls == 1) {
      EXPECT_EQ(m.tool_calls[0].arguments, "{}");
    }
  }
}

TEST(ChatParseK3, RoundTripsTheRenderedTurn) {
  ChatMessage a{"assistant", "Calling.", "Think first.",
                {{"functions.get_weather:0", "get_weather", R"({"city": "Paris", "days": 3, "opts": {"x": [1, 2]}})"},
                 {"functions.search:1", "search", "[1]"}}, "", ""};
  ChatRequest r;
  r.messages = {user("q"), a};
  r.add_generation_prompt = false;
  const std::string text = to_text(render_chat(ChatFormat::kimi_k3, r));
  const std::string head = "<|open|>message role=\"assistant\"<|sep|><|open|>think<|sep|>";
  const std::string turn = text.substr(text.rfind(head) + head.size());
  const ChatMessage m = parse_all_ways(ChatFormat::kimi_k3, k3_tok(), turn, true);
  EXPECT_EQ(m.reasoning, a.reasoning);
  EXPECT_EQ(m.content, a.content);
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(m.tool_calls[0].name, "get_weather");
  EXPECT_EQ(m.tool_calls[0].arguments, a.tool_calls[0].arguments);
  EXPECT_EQ(m.tool_calls[1].name, "search");
  EXPECT_EQ(m.tool_calls[1].arguments, "[1]");  // a json block keeps its text
}

// Random outputs from the formats' pieces (markers, text, split and invalid UTF-8), cut into random ids: the
// streamed deltas always equal the whole parse and are valid UTF-8; nothing throws.
TEST(ChatParse, RandomStreamsEqualWholeParse) {
  const std::vector<std::string> k2_pieces = {
      "<think>", "</think>", "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
      "<|tool_call_argument_begin|>", "<|tool_call_end|>", "functions.f:0", "{\"a\": 1}", "{bad", " ", "\n", "x",
      "é", "\xF0\x9F", "\x98\x80", "\xFF", "<", "<|", "|>", "<|im_end|>"};
  const std::vector<std::string> k3_pieces = {
      "<|open|>", "<|close|>", "<|sep|>", "think", "response", "tools", "call tool=\"f\"", "call", "argument",
      " key=\"k\" type=\"number\"", " key=\"s\"", "json", "{\"a\": 1}", "12", "x", " ", "é", "\xE6\x97", "\xA5",
      "\xC0", "message", "<|end_of_msg|>"};
  std::mt19937 rng(1234);
  for (ChatFormat f : {ChatFormat::kimi_k2, ChatFormat::kimi_k3}) {
    const Tokenizer& tok = f == ChatFormat::kimi_k2 ? k2_tok() : k3_tok();
    const auto& pieces = f == ChatFormat::kimi_k2 ? k2_pieces : k3_pieces;
    for (int iter = 0; iter < 1500; ++iter) {
      std::vector<uint32_t> ids;
      const int n = int(rng() % 24);
      for (int k = 0; k < n; ++k) {
        const std::string& p = pieces[rng() % pieces.size()];
        if (auto sp = tok.special_id(p); sp && rng() % 2) {
          ids.push_back(*sp);
        } else {
          for (uint32_t b : byte_ids(tok, p)) ids.push_back(b);
        }
      }
      const bool thinking = rng() % 2;
      const ChatMessage whole = ChatOutputParser::parse(f, tok, ids, thinking);
      const Streamed s = stream(f, tok, ids, thinking);
      expect_same(s.joined, whole);
      expect_same(s.message, whole);
      if (HasFailure()) {
        ADD_FAILURE() << "format " << to_string(f) << " iteration " << iter << " text " << tok.decode(ids);
        return;
      }
    }
  }
}

}  // namespace
}  // namespace kimi::text
