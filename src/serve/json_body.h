// serve/json_body.h: a request body parsed as JSON, with the field a syntax error sits in.
//
// nlohmann::json parses (and refuses invalid UTF-8 inside strings: JSON text is UTF-8, RFC 8259). A parse callback
// tracks the path of the value being read, so that a refusal names the field, e.g. "messages[1].content": an
// ApiError 400 with code "invalid_utf8" (ill-formed UTF-8) or "invalid_json" (anything else), the byte offset and
// the parser's reason. Nesting deeper than kMaxJsonDepth is refused the same way (the parser itself is iterative,
// the limit keeps every later walk over the value shallow).
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

namespace kimi::serve {

inline constexpr int kMaxJsonDepth = 64;

// The body as JSON; throws ApiError (400) on malformed JSON, invalid UTF-8 or nesting deeper than kMaxJsonDepth.
nlohmann::json parse_json_body(std::string_view body);

}  // namespace kimi::serve
