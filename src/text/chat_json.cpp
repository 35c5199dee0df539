// text/chat_json.cpp: Python's json.dumps and str.strip() as the chat templates use them (chat_json.h).
#include "text/chat_json.h"

#include <algorithm>
#include <vector>

#include "text/utf8.h"

namespace kimi::text {
namespace {

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
  return out;
}

void dump(const OrderedJson& v, const JsonStyle& style, std::string& out) {
  const char* item_sep = style.compact ? "," : ", ";
  const char* key_sep = style.compact ? ":" : ": ";
  if (v.is_object()) {
    std::vector<std::pair<const std::string*, const OrderedJson*>> items;
    for (auto it = v.begin(); it != v.end(); ++it) items.emplace_back(&it.key(), &it.value());
    if (style.sort_keys_ci)
      std::stable_sort(items.begin(), items.end(),
                       [](const auto& a, const auto& b) { return ascii_lower(*a.first) < ascii_lower(*b.first); });
    out += '{';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += item_sep;
      out += OrderedJson(*items[i].first).dump();
      out += key_sep;
      dump(*items[i].second, style, out);
    }
    out += '}';
  } else if (v.is_array()) {
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out += item_sep;
      dump(v[i], style, out);
    }
    out += ']';
  } else {
    out += v.dump();
  }
}

// Python's str.isspace() over scalar values (Unicode White_Space plus the separators U+001C..U+001F).
bool python_space(uint32_t cp) {
  if ((cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680) return true;
  if ((cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000)
    return true;
  return false;
}

}  // namespace

std::string python_json_dumps(const OrderedJson& value, JsonStyle style) {
  std::string out;
  dump(value, style, out);
  return out;
}

bool python_is_blank(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const size_t n = utf8_sequence_length(s.substr(i));
    if (n == 0) return false;
    uint32_t cp = uint8_t(s[i]);
    if (n > 1) {
      cp &= (0xFFu >> (n + 1));
      for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (uint8_t(s[i + k]) & 0x3Fu);
    }
    if (!python_space(cp)) return false;
    i += n;
  }
  return true;
}

}  // namespace kimi::text
