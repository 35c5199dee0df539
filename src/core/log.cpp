// Implementation of kimi/log.h.
#include "kimi/log.h"

#include <cstdio>
#include <mutex>
#include <string>

namespace kimi {
namespace {
std::mutex& mu() {
  static std::mutex m;
  return m;
}
NoteHandler& handler() {
  static NoteHandler h;
  return h;
}
}  // namespace

NoteHandler set_note_handler(NoteHandler h) {
  const std::lock_guard<std::mutex> lock(mu());
  NoteHandler old = std::move(handler());
  handler() = std::move(h);
  return old;
}

void note(std::string_view text) {
  NoteHandler h;
  {
    const std::lock_guard<std::mutex> lock(mu());
    h = handler();
  }
  if (h) return h(text);  // outside the lock: a handler may itself call note()
  const std::string line = "kimi: " + std::string(text) + "\n";
  std::fputs(line.c_str(), stderr);
}

}  // namespace kimi
