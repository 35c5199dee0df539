// text/chat_json.h: JSON text as the chat templates' Python writes it.
//
// The published templates serialize with transformers' `tojson` filter, which is Python's
// json.dumps(value, ensure_ascii=False, separators=...): keys in the order the JSON text gave them (json.loads keeps
// it; nlohmann::ordered_json here), only '"', '\\' and control characters escaped, separators ", " / ": " by default
// or "," / ":" when the template asks for compact output. K3's template also sorts object keys with Jinja's
// dictsort, which compares keys case-insensitively (str.lower(); ties keep their order).
// Numbers are written by nlohmann (shortest round-trip form, like Python's repr for ordinary values; the two differ
// for floats in [1e15, 1e16), which nlohmann writes with an exponent, and for integers beyond 64 bits, which it
// reads as doubles).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kimi::text {

using OrderedJson = nlohmann::ordered_json;

struct JsonStyle {
  bool compact = false;      // separators "," ":" instead of ", " ": "
  bool sort_keys_ci = false;  // object keys in dictsort order (case-insensitive, stable)
};

// value as json.dumps writes it in the given style.
std::string python_json_dumps(const OrderedJson& value, JsonStyle style);

// Whether s is empty after Python's str.strip() (Jinja's `trim`): every character is Python whitespace.
bool python_is_blank(std::string_view s);

}  // namespace kimi::text
