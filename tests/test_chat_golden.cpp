// The chat renderer against the published templates: tests/fixtures/text/chat/kimi_k{2,3}.json hold each
// conversation and the prompt Python's jinja2 renders from the vendored template (scripts/text/gen_chat_goldens.py;
// ctest chat_goldens_fresh renders them again). render_chat's text must equal it byte for byte.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "text/chat.h"

namespace kimi::text {
namespace {

nlohmann::json read_golden(const std::string& format) {
  const std::string path = std::string(KIMI_FIXTURES_DIR) + "/text/chat/" + format + ".json";
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << path;
  std::stringstream ss;
  ss << f.rdbuf();
  return nlohmann::json::parse(ss.str());
}

ChatRequest request_of(const nlohmann::json& j) {
  ChatRequest r;
  for (const auto& m : j.at("messages")) {
    ChatMessage msg;
    msg.role = m.at("role");
    msg.content = m.at("content");
    msg.reasoning = m.at("reasoning");
    msg.tool_call_id = m.at("tool_call_id");
    msg.name = m.at("name");
    for (const auto& c : m.at("tool_calls")) msg.tool_calls.push_back({c.at("id"), c.at("name"), c.at("arguments")});
    r.messages.push_back(std::move(msg));
  }
  r.tools_json = j.at("tools_json");
  r.add_generation_prompt = j.at("add_generation_prompt");
  r.thinking = j.at("thinking");
  r.thinking_effort = j.at("thinking_effort");
  return r;
}

void check_format(ChatFormat f) {
  const nlohmann::json golden = read_golden(std::string(to_string(f)));
  ASSERT_GE(golden.at("cases").size(), 10u);
  for (const auto& c : golden.at("cases")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const std::vector<ChatSegment> segs = render_chat(f, request_of(c.at("request")));
    EXPECT_EQ(to_text(segs), c.at("text").get<std::string>());
  }
}

TEST(ChatGolden, KimiK2MatchesPublishedTemplate) { check_format(ChatFormat::kimi_k2); }
TEST(ChatGolden, KimiK3MatchesPublishedTemplate) { check_format(ChatFormat::kimi_k3); }

}  // namespace
}  // namespace kimi::text
