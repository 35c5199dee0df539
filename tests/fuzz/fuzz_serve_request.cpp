// libFuzzer target: the server's request parsing (src/serve/json_body, request, stop_strings) on arbitrary bytes.
// Every input must either parse or be refused with an ApiError (HTTP 4xx naming a field); nothing else may escape,
// crash or trip ASan / UBSan. A parsed request's fields must hold what the parser promises (serve/request.h), its
// ApiError JSON must serialize, and its stop strings must hold back and cut as StopMatcher promises.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "serve/api_error.h"
#include "serve/json_body.h"
#include "serve/request.h"
#include "serve/stop_strings.h"

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

void check_sampling(const kimi::serve::SamplingRequest& r) {
  require(r.temperature >= 0.f && r.temperature <= 2.f);
  require(r.top_p > 0.f && r.top_p <= 1.f);
  require(r.top_k >= 0);
  require(!r.max_tokens || *r.max_tokens >= 1);
  require(r.stop.size() <= kimi::serve::kMaxStopStrings);
  require(!r.include_usage || r.stream);
  // Stop strings over the request's own model name as text: the shown text never contains a stop string.
  kimi::serve::StopMatcher m(r.stop);
  std::string shown;
  for (size_t i = 0; i < r.model.size(); i += 3) shown += m.push(std::string_view(r.model).substr(i, 3));
  shown += m.finish();
  for (const std::string& s : r.stop) {
    require(!s.empty());
    require(shown.find(s) == std::string::npos);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  nlohmann::json j;
  try {
    j = kimi::serve::parse_json_body(body);
  } catch (const kimi::serve::ApiError& e) {
    require(e.status == 400);
    (void)e.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return 0;
  }
  try {
    check_sampling(kimi::serve::parse_completion_request(j));
  } catch (const kimi::serve::ApiError& e) {
    require(e.status == 400 && !e.param.empty());
    (void)e.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  try {
    const kimi::serve::ChatCompletionRequest r = kimi::serve::parse_chat_request(j);
    check_sampling(r);
    require(!r.messages.empty());
    for (const auto& m : r.messages)
      require(m.role == "system" || m.role == "user" || m.role == "assistant" || m.role == "tool");
  } catch (const kimi::serve::ApiError& e) {
    require(e.status == 400 && !e.param.empty());
    (void)e.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return 0;
}
