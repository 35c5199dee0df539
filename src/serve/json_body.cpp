// Implementation of serve/json_body.h.
#include "serve/json_body.h"

#include <string>
#include <vector>

#include "serve/api_error.h"

namespace kimi::serve {
namespace {

// The path of the value being parsed, from nlohmann's parse events: one frame per open object or array.
class PathTracker {
 public:
  bool on_event(int depth, nlohmann::json::parse_event_t event, const nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    switch (event) {
      case E::object_start:
      case E::array_start:
        if (depth >= kMaxJsonDepth)
          throw ApiError(400, "request body: expected JSON nested at most " + std::to_string(kMaxJsonDepth) +
                                  " levels deep, got deeper" + where(),
                         path(), "invalid_json");
        frames_.push_back({event == E::array_start, 0, {}, false});
        break;
      case E::key:
        if (!frames_.empty()) frames_.back().key = parsed.get<std::string>(), frames_.back().has_key = true;
        break;
      case E::object_end:
      case E::array_end:
        if (!frames_.empty()) frames_.pop_back();
        element_done();
        break;
      case E::value:
        element_done();
        break;
    }
    return true;
  }
  // "messages[1].content"; "" at the top level.
  std::string path() const {
    std::string p;
    for (const Frame& f : frames_) {
      if (f.array) {
        p += "[" + std::to_string(f.count) + "]";
      } else if (f.has_key) {
        p += (p.empty() ? "" : ".") + f.key;
      }
    }
    return p;
  }
  std::string where() const {
    const std::string p = path();
    return p.empty() ? std::string() : " (in " + p + ")";
  }

 private:
  struct Frame {
    bool array;
    int64_t count;  // arrays: elements completed
    std::string key;
    bool has_key;  // objects: a key was read and its value is being parsed
  };
  void element_done() {
    if (frames_.empty()) return;
    Frame& f = frames_.back();
    if (f.array) {
      ++f.count;
    } else {
      f.has_key = false;
    }
  }
  std::vector<Frame> frames_;
};

}  // namespace

nlohmann::json parse_json_body(std::string_view body) {
  PathTracker tracker;
  try {
    return nlohmann::json::parse(
        body.begin(), body.end(),
        [&](int depth, nlohmann::json::parse_event_t e, nlohmann::json& parsed) { return tracker.on_event(depth, e, parsed); });
  } catch (const nlohmann::json::exception& e) {  // parse_error; out_of_range for a number beyond a double (1e9999)
    const std::string why = e.what();
    const bool utf8 = why.find("UTF-8") != std::string::npos;
    const auto* pe = dynamic_cast<const nlohmann::json::parse_error*>(&e);
    // nlohmann's messages: "[json.exception.parse_error.101] parse error at line 1, column 9: syntax error ...",
    // "[json.exception.out_of_range.406] number overflow parsing '1e9999'": the reason is what follows the id and,
    // for parse errors, the position (given as a byte offset instead).
    const size_t id_end = why.rfind("] ", why.find(' '));
    std::string detail = id_end == std::string::npos ? why : why.substr(id_end + 2);
    if (pe != nullptr && detail.find(": ") != std::string::npos) detail = detail.substr(detail.find(": ") + 2);
    throw ApiError(400,
                   std::string(utf8 ? "request body: expected valid UTF-8" : "request body: expected valid JSON") +
                       ", got an error" + (pe ? " at byte " + std::to_string(pe->byte) : std::string()) +
                       tracker.where() + ": " + detail,
                   tracker.path(), utf8 ? "invalid_utf8" : "invalid_json");
  }
}

}  // namespace kimi::serve
