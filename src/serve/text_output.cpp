// Implementation of serve/text_output.h.
#include "serve/text_output.h"

#include <algorithm>

namespace kimi::serve {

std::string CompletionText::push(int32_t id) {
  if (stopped_) return {};
  if (std::find(stop_tokens_.begin(), stop_tokens_.end(), id) != stop_tokens_.end()) {
    stopped_ = true;
    return stop_.push(decoder_.finish()) + stop_.finish();
  }
  std::string out = stop_.push(decoder_.push(uint32_t(id)));
  stopped_ = stop_.stopped();
  return out;
}

std::string CompletionText::finish() {
  if (stopped_) return {};
  std::string out = stop_.push(decoder_.finish());
  return out + stop_.finish();
}

std::vector<int32_t> default_stop_tokens(const text::Tokenizer& tok) {
  std::vector<int32_t> ids;
  for (const char* name : {"[EOS]", "<|im_end|>"})
    if (const auto id = tok.special_id(name)) ids.push_back(int32_t(*id));
  return ids;
}

}  // namespace kimi::serve
