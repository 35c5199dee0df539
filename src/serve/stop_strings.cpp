// Implementation of serve/stop_strings.h.
#include "serve/stop_strings.h"

#include <algorithm>

namespace kimi::serve {

std::string StopMatcher::push(std::string_view text) {
  if (stopped_) return {};
  held_ += text;
  size_t first = std::string::npos;  // the earliest occurrence of any stop string
  for (const std::string& s : stops_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    std::string out = held_.substr(0, first);
    held_.clear();
    stopped_ = true;
    return out;
  }
  // Hold back the longest tail that is a proper prefix of a stop string.
  size_t keep = 0;
  for (const std::string& s : stops_)
    for (size_t k = std::min(s.size() - 1, held_.size()); k > keep; --k)
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        keep = k;
        break;
      }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::finish() {
  std::string out;
  if (!stopped_) out.swap(held_);
  return out;
}

}  // namespace kimi::serve
