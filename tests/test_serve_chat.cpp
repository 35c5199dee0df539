// tests/test_serve_chat.cpp: /v1/chat/completions' preparation and output (serve/chat_output.h) on a byte-level
// tokenizer with the Kimi-Linear (K2) specials: the prompt is text/chat.h's, reasoning / content / tool calls come
// out as OpenAI's fields (streamed and whole), finish_reason "tool_calls", stop strings on the content.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "serve/api_error.h"
#include "serve/chat_output.h"
#include "text/chat.h"

namespace kimi::serve {
namespace {

using nlohmann::json;

text::Tokenizer k2_byte_tokenizer(bool chat = true) {
  std::vector<std::string> by_rank;
  for (int b = 0; b < 256; ++b) by_rank.push_back(std::string(1, char(b)));
  std::vector<text::SpecialToken> specials;
  for (uint32_t k = 0; k < 256; ++k) specials.push_back({"<|reserved_token_" + std::to_string(256 + k) + "|>", 256 + k});
  const std::pair<int, const char*> names[] = {
      {0, "[BOS]"}, {1, "[EOS]"}, {2, "<|im_end|>"}, {3, "<|im_user|>"}, {4, "<|im_assistant|>"},
      {10, "<|im_system|>"}, {11, "<|tool_calls_section_begin|>"}, {12, "<|tool_calls_section_end|>"},
      {13, "<|tool_call_begin|>"}, {14, "<|tool_call_argument_begin|>"}, {15, "<|tool_call_end|>"}, {17, "<|im_middle|>"}};
  for (const auto& [k, name] : names)
    if (chat || k < 2) specials[size_t(k)].text = name;
  return text::Tokenizer(by_rank, specials);
}

ChatCompletionRequest request(std::vector<std::string> stop = {}) {
  ChatCompletionRequest r;
  r.model = "m";
  r.messages = {{"system", "Be brief.", "", {}, "", ""}, {"user", "Weather in Paris?", "", {}, "", ""}};
  r.tools_json = R"([{"type":"function","function":{"name":"get_weather","parameters":{}}}])";
  r.stop = std::move(stop);
  return r;
}

std::vector<int32_t> ids(const text::Tokenizer& tok, const std::string& s) {
  std::vector<int32_t> out;
  for (uint32_t id : tok.encode(s, text::AllowedSpecials::all())) out.push_back(int32_t(id));
  return out;
}

const char* kReply =
    "<think>Paris, so call it.</think>Checking. <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
    "<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|><|tool_calls_section_end|><|im_end|>";

TEST(ServeChat, PromptIsTheChatFormatsAndStopTokensItsTurnEnd) {
  const text::Tokenizer tok = k2_byte_tokenizer();
  const ChatJob job = make_chat_job(tok, request());
  text::ChatRequest cr;
  cr.messages = {{"system", "Be brief.", "", {}, "", ""}, {"user", "Weather in Paris?", "", {}, "", ""}};
  cr.tools_json = request().tools_json;
  std::vector<int32_t> expected;
  for (uint32_t id : text::encode_chat(tok, text::render_chat(text::ChatFormat::kimi_k2, cr))) expected.push_back(int32_t(id));
  EXPECT_EQ(job.prompt, expected);
  EXPECT_EQ(job.stop_tokens, (std::vector<int32_t>{258, 257}));  // <|im_end|>, [EOS]
  EXPECT_FALSE(job.ends_after);  // no stop strings
}

TEST(ServeChat, ReasoningContentAndToolCallsStreamedAndWhole) {
  const text::Tokenizer tok = k2_byte_tokenizer();
  ChatJob job = make_chat_job(tok, request());
  std::vector<json> choices;
  for (int32_t t : ids(tok, kReply)) job.output->push(std::vector<int32_t>{t}, choices);
  job.output->finish(choices);
  ASSERT_FALSE(choices.empty());
  EXPECT_EQ(choices[0]["delta"], json({{"role", "assistant"}, {"content", ""}}));
  std::string reasoning, content, name, args, id;
  for (const json& c : choices) {
    const json& d = c["delta"];
    EXPECT_TRUE(c["finish_reason"].is_null());
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    if (d.contains("content")) content += d["content"].get<std::string>();
    if (d.contains("tool_calls")) {
      for (const json& call : d["tool_calls"]) {
        EXPECT_EQ(call["index"], 0);
        if (call.contains("id")) id = call["id"], name = call["function"]["name"];
        args += call["function"]["arguments"].get<std::string>();
      }
    }
  }
  EXPECT_EQ(reasoning, "Paris, so call it.");
  EXPECT_EQ(content, "Checking. ");
  EXPECT_EQ(id, "functions.get_weather:0");
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(json::parse(args), json({{"city", "Paris"}}));
  const json whole = job.output->whole();
  EXPECT_EQ(whole["message"]["role"], "assistant");
  EXPECT_EQ(whole["message"]["content"], "Checking. ");
  EXPECT_EQ(whole["message"]["reasoning_content"], "Paris, so call it.");
  ASSERT_EQ(whole["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(whole["message"]["tool_calls"][0]["id"], "functions.get_weather:0");
  EXPECT_EQ(whole["message"]["tool_calls"][0]["type"], "function");
  EXPECT_EQ(whole["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(whole["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            json({{"city", "Paris"}}));
  EXPECT_EQ(job.output->stop_reason(), "tool_calls");
}

TEST(ServeChat, StopStringsCutTheContentAndEndTheRequest) {
  const text::Tokenizer tok = k2_byte_tokenizer();
  ChatJob job = make_chat_job(tok, request({"ing."}));
  ASSERT_TRUE(job.ends_after);
  const std::vector<int32_t> t = ids(tok, kReply);
  size_t ended = 0;  // the token after which the engine ends the request
  for (size_t i = 0; i < t.size() && !ended; ++i)
    if (job.ends_after(t[i])) ended = i + 1;
  ASSERT_GT(ended, 0u);
  EXPECT_EQ(tok.decode(std::vector<uint32_t>(t.begin(), t.begin() + int64_t(ended))),
            "<think>Paris, so call it.</think>Checking.");
  std::vector<json> choices;
  job.output->push(std::vector<int32_t>(t.begin(), t.begin() + int64_t(ended)), choices);
  job.output->finish(choices);
  EXPECT_EQ(job.output->whole()["message"]["content"], "Check");
  EXPECT_EQ(job.output->whole()["message"]["reasoning_content"], "Paris, so call it.");
  EXPECT_EQ(job.output->stop_reason(), "stop");
}

TEST(ServeChat, ATokenizerWithoutAChatFormatIsRefused) {
  try {
    make_chat_job(k2_byte_tokenizer(false), request());
    ADD_FAILURE() << "no ApiError";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "model");
    EXPECT_EQ(std::string(e.what()).rfind("model: this checkpoint's tokenizer has no chat format: ", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace kimi::serve
