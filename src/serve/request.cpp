// Implementation of serve/request.h.
#include "serve/request.h"

#include <cmath>
#include <limits>

#include "serve/api_error.h"

namespace kimi::serve {
namespace {

using nlohmann::json;

std::string type_name(const json& v) {
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

[[noreturn]] void bad(const std::string& field, const std::string& expected, const std::string& got,
                      const std::string& code = "invalid_value") {
  throw ApiError(400, field + ": expected " + expected + ", got " + got, field, code);
}
[[noreturn]] void bad_type(const std::string& field, const std::string& expected, const json& v) {
  bad(field, expected, type_name(v), "invalid_type");
}

// The field's value, or nullptr when it is absent or null (both mean: the default).
const json* field(const json& obj, const char* name) {
  const auto it = obj.find(name);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

std::string str(const json& v, const std::string& name) {
  if (!v.is_string()) bad_type(name, "a string", v);
  return v.get<std::string>();
}
bool boolean(const json& v, const std::string& name) {
  if (!v.is_boolean()) bad_type(name, "a boolean", v);
  return v.get<bool>();
}
double number(const json& v, const std::string& name) {
  if (!v.is_number()) bad_type(name, "a number", v);
  return v.get<double>();
}
int64_t integer(const json& v, const std::string& name) {
  if (!v.is_number_integer()) bad_type(name, "an integer", v);
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    bad(name, "an integer below 2^63", v.dump());
  return v.get<int64_t>();
}

// A field that this server does not implement: accepted only with its no-op value.
void refuse_unless(const json& body, const char* name, bool noop_ok, const std::string& supported) {
  const json* v = field(body, name);
  if (v == nullptr) return;
  bool noop = false;
  if (v->is_boolean()) noop = !v->get<bool>();
  else if (v->is_number()) noop = v->get<double>() == 0;
  else if (v->is_object() || v->is_array()) noop = v->empty();
  else if (v->is_string()) noop = v->get<std::string>().empty();
  if (!(noop && noop_ok)) bad(name, supported + " (not supported by this server)", v->dump(), "unsupported_value");
}

void parse_sampling(const json& body, SamplingRequest& r) {
  if (!body.is_object()) bad_type("body", "a JSON object", body);
  const json* model = field(body, "model");
  if (model == nullptr) bad("model", "the model's name (a string)", "nothing", "missing_field");
  r.model = str(*model, "model");
  if (const json* v = field(body, "temperature")) {
    const double t = number(*v, "temperature");
    if (!(t >= 0 && t <= 2)) bad("temperature", "a number in [0, 2]", v->dump());
    r.temperature = float(t);
  }
  if (const json* v = field(body, "top_p")) {
    const double p = number(*v, "top_p");
    if (!(p > 0 && p <= 1)) bad("top_p", "a number in (0, 1]", v->dump());
    r.top_p = float(p);
  }
  if (const json* v = field(body, "top_k")) {
    const int64_t k = integer(*v, "top_k");
    if (k < -1 || k > std::numeric_limits<int>::max()) bad("top_k", "an integer >= -1 (-1 or 0: all tokens)", v->dump());
    r.top_k = k < 0 ? 0 : int(k);
  }
  for (const char* name : {"max_tokens", "max_completion_tokens"}) {
    const json* v = field(body, name);
    if (v == nullptr) continue;
    const int64_t m = integer(*v, name);
    if (m < 1) bad(name, "an integer >= 1", v->dump());
    if (r.max_tokens && *r.max_tokens != m)
      bad(name, "the same value as max_tokens when both are given", v->dump() + " and " + std::to_string(*r.max_tokens));
    r.max_tokens = m, r.max_tokens_field = name;
  }
  if (const json* v = field(body, "seed")) {
    if (!v->is_number_integer()) bad_type("seed", "an integer", *v);
    r.seed = v->is_number_unsigned() ? v->get<uint64_t>() : uint64_t(v->get<int64_t>());
  }
  if (const json* v = field(body, "n")) {
    const int64_t n = integer(*v, "n");
    if (n != 1) bad("n", "1 (one choice per request)", v->dump());
  }
  if (const json* v = field(body, "stop")) {
    if (v->is_string()) {
      r.stop.push_back(v->get<std::string>());
    } else if (v->is_array()) {
      if (v->size() > kMaxStopStrings)
        bad("stop", "at most " + std::to_string(kMaxStopStrings) + " strings", std::to_string(v->size()));
      for (size_t i = 0; i < v->size(); ++i) r.stop.push_back(str((*v)[i], "stop[" + std::to_string(i) + "]"));
    } else {
      bad_type("stop", "a string or an array of strings", *v);
    }
    for (size_t i = 0; i < r.stop.size(); ++i)
      if (r.stop[i].empty()) bad(v->is_string() ? "stop" : "stop[" + std::to_string(i) + "]", "a non-empty string", "\"\"");
  }
  if (const json* v = field(body, "stream")) r.stream = boolean(*v, "stream");
  if (const json* v = field(body, "stream_options")) {
    if (!v->is_object()) bad_type("stream_options", "an object", *v);
    if (!r.stream) bad("stream_options", "stream_options only with \"stream\": true", v->dump());
    if (const json* u = field(*v, "include_usage")) r.include_usage = boolean(*u, "stream_options.include_usage");
    if (const json* u = field(*v, "continuous_usage_stats"))
      r.continuous_usage = boolean(*u, "stream_options.continuous_usage_stats");
  }
  refuse_unless(body, "logprobs", true, "no logprobs");
  refuse_unless(body, "top_logprobs", true, "no top_logprobs");
  refuse_unless(body, "echo", true, "false");
  refuse_unless(body, "logit_bias", true, "an empty logit_bias");
  refuse_unless(body, "presence_penalty", true, "0");
  refuse_unless(body, "frequency_penalty", true, "0");
  refuse_unless(body, "suffix", true, "no suffix");
  if (const json* v = field(body, "best_of"))
    if (integer(*v, "best_of") != 1) bad("best_of", "1", v->dump(), "unsupported_value");
  if (const json* v = field(body, "response_format")) {
    if (!v->is_object()) bad_type("response_format", "an object", *v);
    const json* t = field(*v, "type");
    if (t != nullptr && str(*t, "response_format.type") != "text")
      bad("response_format.type", "\"text\" (not supported by this server: json_object, json_schema)", t->dump(),
          "unsupported_value");
  }
}

// A message's content: a string, an array of {"type": "text", "text": ...} parts (concatenated), or null.
std::string content_text(const json& v, const std::string& name) {
  if (v.is_null()) return {};
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) bad_type(name, "a string, an array of text parts or null", v);
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string part = name + "[" + std::to_string(i) + "]";
    const json& p = v[i];
    if (!p.is_object()) bad_type(part, "an object {\"type\": \"text\", \"text\": ...}", p);
    const json* type = field(p, "type");
    const std::string t = type ? str(*type, part + ".type") : "";
    if (t != "text") bad(part + ".type", "\"text\" (the only content part this server reads)", type ? type->dump() : "nothing");
    const json* text = field(p, "text");
    if (text == nullptr) bad(part + ".text", "a string", "nothing", "missing_field");
    s += str(*text, part + ".text");
  }
  return s;
}

ChatMessageIn parse_message(const json& m, const std::string& name) {
  if (!m.is_object()) bad_type(name, "a message object", m);
  ChatMessageIn out;
  const json* role = field(m, "role");
  if (role == nullptr) bad(name + ".role", "one of system, developer, user, assistant, tool", "nothing", "missing_field");
  out.role = str(*role, name + ".role");
  if (out.role == "developer") out.role = "system";
  if (out.role != "system" && out.role != "user" && out.role != "assistant" && out.role != "tool")
    bad(name + ".role", "one of system, developer, user, assistant, tool", role->dump());
  const auto it = m.find("content");
  if (it != m.end()) out.content = content_text(*it, name + ".content");
  else if (out.role != "assistant") bad(name + ".content", "a string or an array of text parts", "nothing", "missing_field");
  if (out.role == "assistant") {
    if (const json* r = field(m, "reasoning_content")) out.reasoning = str(*r, name + ".reasoning_content");
    if (const json* calls = field(m, "tool_calls")) {
      if (!calls->is_array()) bad_type(name + ".tool_calls", "an array", *calls);
      for (size_t i = 0; i < calls->size(); ++i) {
        const std::string cn = name + ".tool_calls[" + std::to_string(i) + "]";
        const json& c = (*calls)[i];
        if (!c.is_object()) bad_type(cn, "a tool call object", c);
        ChatToolCall tc;
        if (const json* id = field(c, "id")) tc.id = str(*id, cn + ".id");
        const json* fn = field(c, "function");
        if (fn == nullptr || !fn->is_object()) bad(cn + ".function", "an object with name and arguments", fn ? type_name(*fn) : "nothing");
        const json* fname = field(*fn, "name");
        if (fname == nullptr) bad(cn + ".function.name", "a string", "nothing", "missing_field");
        tc.name = str(*fname, cn + ".function.name");
        if (const json* a = field(*fn, "arguments")) tc.arguments = a->is_string() ? a->get<std::string>() : a->dump();
        out.tool_calls.push_back(std::move(tc));
      }
    }
  }
  if (out.role == "tool") {
    if (const json* id = field(m, "tool_call_id")) out.tool_call_id = str(*id, name + ".tool_call_id");
  }
  if (const json* n = field(m, "name")) out.name = str(*n, name + ".name");
  return out;
}

}  // namespace

CompletionRequest parse_completion_request(const json& body) {
  CompletionRequest r;
  parse_sampling(body, r);
  if (const json* v = field(body, "ignore_eos")) r.ignore_eos = boolean(*v, "ignore_eos");
  const json* p = field(body, "prompt");
  if (p == nullptr) bad("prompt", "a string or an array of token ids", "nothing", "missing_field");
  if (p->is_string()) {
    r.prompt_text = p->get<std::string>();
  } else if (p->is_array()) {
    if (!p->empty() && ((*p)[0].is_string() || (*p)[0].is_array()))
      bad("prompt", "one prompt (a string or an array of token ids; batches of prompts are not supported)",
          "an array of " + std::to_string(p->size()) + " prompts", "unsupported_value");
    r.prompt_is_ids = true;
    for (size_t i = 0; i < p->size(); ++i) {
      const json& t = (*p)[i];
      const std::string name = "prompt[" + std::to_string(i) + "]";
      const int64_t id = integer(t, name);
      if (id < 0) bad(name, "a token id >= 0", t.dump());
      r.prompt_ids.push_back(id);
    }
  } else {
    bad_type("prompt", "a string or an array of token ids", *p);
  }
  return r;
}

ChatCompletionRequest parse_chat_request(const json& body) {
  ChatCompletionRequest r;
  parse_sampling(body, r);
  if (const json* v = field(body, "ignore_eos"); v != nullptr && boolean(*v, "ignore_eos"))
    bad("ignore_eos", "false (a chat reply ends at its turn end; ignore_eos is for /v1/completions)", "true",
        "unsupported_value");
  const json* msgs = field(body, "messages");
  if (msgs == nullptr) bad("messages", "a non-empty array of messages", "nothing", "missing_field");
  if (!msgs->is_array()) bad_type("messages", "a non-empty array of messages", *msgs);
  if (msgs->empty()) bad("messages", "a non-empty array of messages", "an empty array");
  for (size_t i = 0; i < msgs->size(); ++i) r.messages.push_back(parse_message((*msgs)[i], "messages[" + std::to_string(i) + "]"));
  std::string choice = "auto";
  if (const json* v = field(body, "tool_choice")) {
    if (!v->is_string() || (v->get<std::string>() != "auto" && v->get<std::string>() != "none"))
      bad("tool_choice", "\"auto\" or \"none\" (required and named tools are not supported by this server)", v->dump(),
          "unsupported_value");
    choice = v->get<std::string>();
  }
  if (const json* v = field(body, "tools")) {
    if (!v->is_array()) bad_type("tools", "an array of tools", *v);
    for (size_t i = 0; i < v->size(); ++i) {
      const json& t = (*v)[i];
      const std::string name = "tools[" + std::to_string(i) + "]";
      if (!t.is_object()) bad_type(name, "a tool object", t);
      const json* fn = field(t, "function");
      if (fn == nullptr || !fn->is_object()) bad(name + ".function", "an object with a name", fn ? type_name(*fn) : "nothing");
      const json* fname = field(*fn, "name");
      if (fname == nullptr) bad(name + ".function.name", "a string", "nothing", "missing_field");
      str(*fname, name + ".function.name");
    }
    if (!v->empty() && choice != "none") r.tools_json = v->dump();
  }
  if (const json* v = field(body, "reasoning_effort")) {
    r.reasoning_effort = str(*v, "reasoning_effort");
    if (r.reasoning_effort != "low" && r.reasoning_effort != "high" && r.reasoning_effort != "max")
      bad("reasoning_effort", "low, high or max", v->dump());
  }
  return r;
}

}  // namespace kimi::serve
