// tests/test_serve_request.cpp: the server's request parsing (src/serve/json_body, request), stop strings and the
// completion text: every refusal's status, field, code and message, and what valid requests become.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "serve/api_error.h"
#include "serve/json_body.h"
#include "serve/request.h"
#include "serve/stop_strings.h"
#include "serve/text_output.h"
#include "text/tokenizer.h"

namespace kimi::serve {
namespace {

using nlohmann::json;

// The ApiError f() throws (a test failure when none).
template <class F>
ApiError api_error_of(F&& f) {
  try {
    f();
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no ApiError thrown";
  return ApiError(0, "");
}

ApiError completion_error(const std::string& body) {
  return api_error_of([&] { parse_completion_request(parse_json_body(body)); });
}
ApiError chat_error(const std::string& body) {
  return api_error_of([&] { parse_chat_request(parse_json_body(body)); });
}

TEST(ServeJsonBody, MalformedJsonNamesTheByteAndTheField) {
  const ApiError e = api_error_of([] { parse_json_body(R"({"model": "m", "max_tokens": })"); });
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "max_tokens");
  EXPECT_EQ(e.code, "invalid_json");
  EXPECT_EQ(std::string(e.what()).rfind("request body: expected valid JSON, got an error at byte 30 (in max_tokens): ", 0), 0u)
      << e.what();
  const json j = e.to_json();
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "max_tokens");
  EXPECT_EQ(j["error"]["code"], "invalid_json");
  EXPECT_EQ(api_error_of([] { parse_json_body(""); }).code, "invalid_json");
  EXPECT_EQ(api_error_of([] { parse_json_body("{} x"); }).param, "");
  // A number beyond a double is nlohmann's out_of_range, refused the same way (found by fuzz_serve_request).
  const ApiError big = api_error_of([] { parse_json_body(R"({"temperature": 1e9999})"); });
  EXPECT_EQ(big.param, "temperature");
  EXPECT_EQ(std::string(big.what()), "request body: expected valid JSON, got an error (in temperature): number overflow "
                                     "parsing '1e9999'");
}

TEST(ServeJsonBody, InvalidUtf8NamesTheField) {
  const std::string body = "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"ok\"}, "
                           "{\"role\": \"user\", \"content\": \"bad \xff\"}]}";
  const ApiError e = api_error_of([&] { parse_json_body(body); });
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.code, "invalid_utf8");
  EXPECT_EQ(e.param, "messages[1].content");
  EXPECT_NE(std::string(e.what()).find("request body: expected valid UTF-8, got an error at byte"), std::string::npos)
      << e.what();
  // A lone surrogate escape is not a scalar value either.
  EXPECT_EQ(api_error_of([] { parse_json_body(R"({"prompt": "\ud800"})"); }).param, "prompt");
}

TEST(ServeJsonBody, RefusesDeepNesting) {
  const std::string deep = std::string(100, '[') + std::string(100, ']');
  const ApiError e = api_error_of([&] { parse_json_body(deep); });
  EXPECT_EQ(e.status, 400);
  EXPECT_NE(std::string(e.what()).find("expected JSON nested at most 64 levels deep"), std::string::npos) << e.what();
  EXPECT_NO_THROW(parse_json_body(std::string(10, '[') + std::string(10, ']')));
}

TEST(ServeRequest, CompletionFieldsAndDefaults) {
  const CompletionRequest r = parse_completion_request(parse_json_body(
      R"({"model": "m", "prompt": "hi", "temperature": 0, "top_p": 0.5, "top_k": -1, "max_tokens": 7,
          "stop": ["a", "bc"], "seed": -1, "n": 1, "stream": true,
          "stream_options": {"include_usage": true, "continuous_usage_stats": true}, "ignore_eos": true,
          "user": "ignored", "logprobs": null, "echo": false, "presence_penalty": 0})"));
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.prompt_text, "hi");
  EXPECT_FALSE(r.prompt_is_ids);
  EXPECT_EQ(r.temperature, 0.f);
  EXPECT_EQ(r.top_p, 0.5f);
  EXPECT_EQ(r.top_k, 0);
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(r.seed, ~uint64_t(0));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.continuous_usage);
  EXPECT_TRUE(r.ignore_eos);

  const CompletionRequest d = parse_completion_request(parse_json_body(R"({"model": "m", "prompt": [1, 2, 300],
      "max_completion_tokens": 3, "stop": "x", "temperature": null})"));
  EXPECT_TRUE(d.prompt_is_ids);
  EXPECT_EQ(d.prompt_ids, (std::vector<int64_t>{1, 2, 300}));
  EXPECT_EQ(d.temperature, 1.f);  // OpenAI's default
  EXPECT_EQ(d.max_tokens, 3);
  EXPECT_EQ(d.max_tokens_field, "max_completion_tokens");
  EXPECT_EQ(d.stop, (std::vector<std::string>{"x"}));
  EXPECT_FALSE(d.seed.has_value());
  EXPECT_FALSE(d.stream);
  EXPECT_FALSE(d.continuous_usage);
  EXPECT_FALSE(d.ignore_eos);
}

TEST(ServeRequest, CompletionRefusalsNameTheField) {
  struct Case {
    std::string body, param, message, code;
  };
  const Case cases[] = {
      {R"({"prompt": "x"})", "model", "model: expected the model's name (a string), got nothing", "missing_field"},
      {R"({"model": 3, "prompt": "x"})", "model", "model: expected a string, got an integer", "invalid_type"},
      {R"({"model": "m"})", "prompt", "prompt: expected a string or an array of token ids, got nothing", "missing_field"},
      {R"({"model": "m", "prompt": "x", "max_tokens": -5})", "max_tokens", "max_tokens: expected an integer >= 1, got -5",
       "invalid_value"},
      {R"({"model": "m", "prompt": "x", "max_tokens": 0})", "max_tokens", "max_tokens: expected an integer >= 1, got 0",
       "invalid_value"},
      {R"({"model": "m", "prompt": "x", "max_tokens": 2.5})", "max_tokens", "max_tokens: expected an integer, got a number",
       "invalid_type"},
      {R"({"model": "m", "prompt": "x", "max_completion_tokens": -1})", "max_completion_tokens",
       "max_completion_tokens: expected an integer >= 1, got -1", "invalid_value"},
      {R"({"model": "m", "prompt": "x", "max_tokens": 4, "max_completion_tokens": 5})", "max_completion_tokens",
       "max_completion_tokens: expected the same value as max_tokens when both are given, got 5 and 4", "invalid_value"},
      {R"({"model": "m", "prompt": "x", "n": 2})", "n", "n: expected 1 (one choice per request), got 2", "invalid_value"},
      {R"({"model": "m", "prompt": "x", "temperature": 2.5})", "temperature", "temperature: expected a number in [0, 2], got 2.5",
       "invalid_value"},
      {R"({"model": "m", "prompt": "x", "temperature": "hot"})", "temperature", "temperature: expected a number, got a string",
       "invalid_type"},
      {R"({"model": "m", "prompt": "x", "top_p": 0})", "top_p", "top_p: expected a number in (0, 1], got 0", "invalid_value"},
      {R"({"model": "m", "prompt": "x", "top_k": -2})", "top_k", "top_k: expected an integer >= -1 (-1 or 0: all tokens), got -2",
       "invalid_value"},
      {R"({"model": "m", "prompt": "x", "stop": ["a", "b", "c", "d", "e"]})", "stop", "stop: expected at most 4 strings, got 5",
       "invalid_value"},
      {R"({"model": "m", "prompt": "x", "stop": ["a", 1]})", "stop[1]", "stop[1]: expected a string, got an integer",
       "invalid_type"},
      {R"({"model": "m", "prompt": "x", "stop": ""})", "stop", "stop: expected a non-empty string, got \"\"", "invalid_value"},
      {R"({"model": "m", "prompt": "x", "seed": 1.5})", "seed", "seed: expected an integer, got a number", "invalid_type"},
      {R"({"model": "m", "prompt": "x", "stream": 1})", "stream", "stream: expected a boolean, got an integer", "invalid_type"},
      {R"({"model": "m", "prompt": "x", "stream_options": {"include_usage": true}})", "stream_options",
       "stream_options: expected stream_options only with \"stream\": true, got {\"include_usage\":true}", "invalid_value"},
      {R"({"model": "m", "prompt": "x", "stream": true, "stream_options": {"continuous_usage_stats": 1}})",
       "stream_options.continuous_usage_stats",
       "stream_options.continuous_usage_stats: expected a boolean, got an integer", "invalid_type"},
      {R"({"model": "m", "prompt": "x", "ignore_eos": "yes"})", "ignore_eos",
       "ignore_eos: expected a boolean, got a string", "invalid_type"},
      {R"({"model": "m", "prompt": [1, -2]})", "prompt[1]", "prompt[1]: expected a token id >= 0, got -2", "invalid_value"},
      {R"({"model": "m", "prompt": ["a", "b"]})", "prompt",
       "prompt: expected one prompt (a string or an array of token ids; batches of prompts are not supported), got an array "
       "of 2 prompts", "unsupported_value"},
      {R"({"model": "m", "prompt": "x", "logprobs": 2})", "logprobs",
       "logprobs: expected no logprobs (not supported by this server), got 2", "unsupported_value"},
      {R"({"model": "m", "prompt": "x", "echo": true})", "echo", "echo: expected false (not supported by this server), got true",
       "unsupported_value"},
      {R"([1, 2])", "body", "body: expected a JSON object, got an array", "invalid_type"},
  };
  for (const Case& c : cases) {
    const ApiError e = completion_error(c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_EQ(std::string(e.what()), c.message) << c.body;
    EXPECT_EQ(e.code, c.code) << c.body;
  }
}

TEST(ServeRequest, ChatMessagesToolsAndRefusals) {
  const ChatCompletionRequest r = parse_chat_request(parse_json_body(R"({"model": "m", "messages": [
      {"role": "developer", "content": "be brief"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": null, "reasoning_content": "hm",
       "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"x\":1}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "42"}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}], "tool_choice": "auto",
      "reasoning_effort": "high"})"));
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "ab");
  EXPECT_EQ(r.messages[2].reasoning, "hm");
  ASSERT_EQ(r.messages[2].tool_calls.size(), 1u);
  EXPECT_EQ(r.messages[2].tool_calls[0].name, "f");
  EXPECT_EQ(r.messages[2].tool_calls[0].arguments, "{\"x\":1}");
  EXPECT_EQ(r.messages[3].tool_call_id, "c1");
  EXPECT_EQ(json::parse(r.tools_json)[0]["function"]["name"], "f");
  EXPECT_EQ(r.reasoning_effort, "high");
  // tool_choice "none": the template declares no tools.
  EXPECT_EQ(parse_chat_request(parse_json_body(R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
      "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "none"})")).tools_json, "");

  struct Case {
    std::string body, param, message;
  };
  const Case cases[] = {
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}, {"role": "wizard", "content": "y"}]})",
       "messages[1].role", "messages[1].role: expected one of system, developer, user, assistant, tool, got \"wizard\""},
      {R"({"model": "m", "messages": []})", "messages", "messages: expected a non-empty array of messages, got an empty array"},
      {R"({"model": "m"})", "messages", "messages: expected a non-empty array of messages, got nothing"},
      {R"({"model": "m", "messages": [{"role": "user"}]})", "messages[0].content",
       "messages[0].content: expected a string or an array of text parts, got nothing"},
      {R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", "messages[0].content[0].type",
       "messages[0].content[0].type: expected \"text\" (the only content part this server reads), got \"image_url\""},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "tool_choice": "required"})", "tool_choice",
       "tool_choice: expected \"auto\" or \"none\" (required and named tools are not supported by this server), got "
       "\"required\""},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]})",
       "tools[0].function", "tools[0].function: expected an object with a name, got nothing"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "reasoning_effort": "medium"})",
       "reasoning_effort", "reasoning_effort: expected low, high or max, got \"medium\""},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "ignore_eos": true})", "ignore_eos",
       "ignore_eos: expected false (a chat reply ends at its turn end; ignore_eos is for /v1/completions), got true"},
  };
  for (const Case& c : cases) {
    const ApiError e = chat_error(c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_EQ(std::string(e.what()), c.message) << c.body;
  }
}

TEST(ServeStopMatcher, HoldsBackPartialMatchesAndCutsBeforeTheStop) {
  StopMatcher m({"END", "xy"});
  EXPECT_EQ(m.push("hello E"), "hello ");  // "E" could start "END"
  EXPECT_EQ(m.push("N"), "");              // "EN" still could
  EXPECT_EQ(m.push("Z"), "ENZ");           // not any more
  EXPECT_EQ(m.push("ax"), "a");
  EXPECT_EQ(m.push("yrest"), "");          // "xy" found: nothing after it
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.push("more"), "");
  EXPECT_EQ(m.finish(), "");

  StopMatcher n({"\xC3\xA9t\xC3\xA9"});  // "été": held back whole characters only
  EXPECT_EQ(n.push("caf\xC3\xA9"), "caf");
  EXPECT_EQ(n.push("!"), "\xC3\xA9!");
  EXPECT_EQ(n.push("\xC3\xA9t"), "");
  EXPECT_EQ(n.finish(), "\xC3\xA9t");  // the end: what was held is shown
  EXPECT_FALSE(n.stopped());

  StopMatcher earliest({"bc", "abcd"});
  EXPECT_EQ(earliest.push("zabcd"), "z");  // the first occurrence of any stop string ("abcd" at 1, "bc" at 2)
}

// A byte-level tokenizer: ranks 0..255 are the bytes, ids 256.. the specials.
text::Tokenizer byte_tokenizer() {
  std::vector<std::string> by_rank;
  for (int b = 0; b < 256; ++b) by_rank.push_back(std::string(1, char(b)));
  std::vector<text::SpecialToken> specials;
  for (uint32_t k = 0; k < 256; ++k) specials.push_back({"<|reserved_token_" + std::to_string(256 + k) + "|>", 256 + k});
  specials[1].text = "[EOS]";
  specials[2].text = "<|im_end|>";
  return text::Tokenizer(by_rank, specials);
}

TEST(ServeCompletionText, Utf8StopStringsAndStopTokens) {
  const text::Tokenizer tok = byte_tokenizer();
  EXPECT_EQ(default_stop_tokens(tok), (std::vector<int32_t>{257, 258}));
  CompletionText t(tok, {"!!"}, {257});
  EXPECT_EQ(t.push(0xC3), "");  // half of "é"
  EXPECT_EQ(t.push(0xA9), "\xC3\xA9");
  EXPECT_EQ(t.push('!'), "");
  EXPECT_EQ(t.push('a'), "!a");
  EXPECT_EQ(t.push('!'), "");
  EXPECT_FALSE(t.stopped());
  EXPECT_EQ(t.push('!'), "");
  EXPECT_TRUE(t.stopped());

  CompletionText u(tok, {}, {257});
  EXPECT_EQ(u.push('o'), "o");
  EXPECT_EQ(u.push(0xE2), "");
  EXPECT_EQ(u.push(257), "\xEF\xBF\xBD");  // [EOS] ends the text; the cut character is U+FFFD, [EOS] is not shown
  EXPECT_TRUE(u.stopped());
  CompletionText v(tok, {"zz"}, {});
  EXPECT_EQ(v.push('z'), "");
  EXPECT_EQ(v.finish(), "z");
}

}  // namespace
}  // namespace kimi::serve
