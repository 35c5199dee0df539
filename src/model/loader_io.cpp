// Implementation of model/loader_io.h.
#include "model/loader_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <vector>

#include "kimi/error.h"

namespace kimi::model {

namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;

// Closes a file descriptor on every path out of read_text_file.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

const char* file_kind(mode_t m) {
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a file or directory";
}

// The first proper prefix of `path` (a/, a/b/, ...) for which pred(stat result, stat ok) holds.
template <class Pred>
std::string first_prefix(const std::string& path, Pred pred) {
  const fs::path p(path);
  fs::path cur;
  std::vector<fs::path> prefixes;
  for (const fs::path& c : p) {
    cur /= c;
    prefixes.push_back(cur);
  }
  if (!prefixes.empty()) prefixes.pop_back();  // the path itself
  for (const fs::path& q : prefixes) {
    struct stat st {};
    const bool ok = ::stat(q.c_str(), &st) == 0;
    if (pred(st, ok)) return q.string();
  }
  return "";
}

std::string open_reason(const std::string& path, int err, const char* noun) {
  switch (err) {
    case ENOENT: {
      struct stat st {};
      if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
        return "a symbolic link to a missing target";
      const std::string missing = first_prefix(path, [](const struct stat&, bool ok) { return !ok; });
      if (!missing.empty()) return "directory '" + printable(missing, 4096) + "' does not exist";
      return std::string("no such ") + noun;
    }
    case ENOTDIR: {
      const std::string file =
          first_prefix(path, [](const struct stat& st, bool ok) { return ok && !S_ISDIR(st.st_mode); });
      if (!file.empty()) return "'" + printable(file, 4096) + "' is a file, not a directory";
      return std::strerror(err);
    }
    case EACCES:
      return "permission denied";
    case EISDIR:
      return "is a directory, not a file";
    case ELOOP:
      return "too many levels of symbolic links";
    default:
      return std::strerror(err);
  }
}
}  // namespace

std::string printable(std::string_view bytes, size_t max_bytes) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  const size_t n = std::min(bytes.size(), max_bytes);
  out.reserve(n + 16);
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c == '\\') {
      out += "\\\\";
    } else if (c >= 0x20 && c < 0x7f) {
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (bytes.size() > max_bytes) out += "... (" + std::to_string(bytes.size()) + " bytes)";
  return out;
}

std::string quote(std::string_view s, size_t max_bytes) {
  return "'" + printable(s, max_bytes) + "'";
}

std::string json_excerpt(const json& v, size_t max_bytes) {
  // ensure_ascii: control characters and non-ASCII come out as \uXXXX, so the text is printable already.
  std::string s = v.dump(-1, ' ', /*ensure_ascii=*/true, json::error_handler_t::replace);
  if (s.size() > max_bytes) s = s.substr(0, max_bytes) + "... (" + std::to_string(s.size()) + " bytes)";
  return s;
}

std::string open_error_reason(const std::string& path, int err) {
  return open_reason(path, err, "file");
}

void require_directory(const std::string& dir, const std::string& prefix, const std::string& expected) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) throw Error(prefix + dir + ": " + open_reason(dir, errno, "directory"));
  if (!S_ISDIR(st.st_mode))
    throw Error(prefix + dir + ": " + (S_ISREG(st.st_mode) ? "is a file" : file_kind(st.st_mode)) +
                ", not a directory (expected " + expected + ")");
  if (::access(dir.c_str(), R_OK | X_OK) != 0)
    throw Error(prefix + dir + ": " + open_reason(dir, errno, "directory"));
}

std::string read_text_file(const std::string& path, const std::string& prefix, uint64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below); regular files ignore it.
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (f.fd < 0) throw Error(prefix + path + ": cannot open: " + open_error_reason(path, errno));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) throw Error(prefix + path + ": cannot open: " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw Error(prefix + path + ": cannot open: is a directory, not a file");
  if (!S_ISREG(st.st_mode))
    throw Error(prefix + path + ": cannot open: not a regular file (" + file_kind(st.st_mode) + ")");
  const uint64_t size = uint64_t(st.st_size);
  if (size > max_bytes)
    throw Error(prefix + path + ": file of " + std::to_string(size) + " bytes exceeds the limit of " +
                std::to_string(max_bytes) + " bytes for this file");
  std::string text(size_t(size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t r = ::read(f.fd, text.data() + done, text.size() - done);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw Error(prefix + path + ": read failed: " + std::strerror(errno));
    if (r == 0) break;  // the file shrank while being read
    done += size_t(r);
  }
  text.resize(done);
  return text;
}

json parse_json_strict(std::string_view text, const std::string& where, uint64_t base_offset) {
  // One frame per open object or array: its path for messages and, for objects, the keys seen so far.
  struct Frame {
    bool object;
    std::string path, last_key;
    std::set<std::string> keys;
  };
  std::vector<Frame> stack;
  auto child_path = [&]() -> std::string {
    if (stack.empty()) return "";
    const Frame& p = stack.back();
    if (!p.object) return p.path + "[]";
    return p.path.empty() ? p.last_key : p.path + "." + p.last_key;
  };
  const json::parser_callback_t cb = [&](int /*depth*/, json::parse_event_t ev, json& parsed) {
    switch (ev) {
      case json::parse_event_t::object_start:
        stack.push_back({true, child_path(), "", {}});
        break;
      case json::parse_event_t::array_start:
        stack.push_back({false, child_path(), "", {}});
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        stack.pop_back();
        break;
      case json::parse_event_t::key: {
        Frame& f = stack.back();
        f.last_key = parsed.get<std::string>();
        if (!f.keys.insert(f.last_key).second)
          throw Error(where + ": key " + quote(f.last_key) + " appears twice in " +
                      (f.path.empty() ? std::string("the top-level object") : "object " + quote(f.path)) +
                      " (a JSON key must be unique)");
        break;
      }
      case json::parse_event_t::value:
        break;
    }
    return true;
  };
  // "<where>: not valid JSON at byte B (line L, column C): <why>; the bytes up to there: '<escaped>'".
  auto syntax_error = [&](size_t at, const std::string& why) {
    const size_t line = size_t(std::count(text.begin(), text.begin() + std::ptrdiff_t(at), '\n')) + 1;
    const size_t line_start = at == 0 ? std::string_view::npos : text.rfind('\n', at - 1);
    const size_t column = line_start == std::string_view::npos ? at + 1 : at - line_start;
    const size_t from = at > 24 ? at - 24 : 0;
    const std::string_view near = text.substr(from, std::min(text.size(), at + 1) - from);
    std::string msg = where + ": not valid JSON at byte " + std::to_string(base_offset + at) +
                      (base_offset ? " of the file" : "") + " (line " + std::to_string(line) + ", column " +
                      std::to_string(column) + "): " + printable(why, 160);
    msg +=
        at >= text.size() ? " (the text ends there)" : "; the bytes up to there: '" + printable(near) + "'";
    return Error(msg);
  };
  // NOTE: nlohmann's lexer takes a NUL byte for the end of the input, so "{}\0junk" would parse: the text is
  // parsed up to its first NUL, and a NUL the parse reaches is itself the error.
  const size_t nul = std::min(text.find('\0'), text.size());
  const std::string nul_why = "a NUL byte, which JSON text never contains";
  json out;
  try {
    out = json::parse(text.begin(), text.begin() + std::ptrdiff_t(nul), cb);
  } catch (const json::parse_error& e) {
    // e.byte: 1-based count of the bytes read when the error was found (the offending byte is the last).
    const size_t at = std::min<size_t>(e.byte > 0 ? e.byte - 1 : 0, nul);
    if (at == nul && nul < text.size()) throw syntax_error(nul, nul_why);
    // nlohmann's text: "[json.exception.parse_error.101] parse error at line L, column C: <why>;
    // last read: '<raw bytes>'[; expected ...]": keep <why> and the expectation; the raw bytes are
    // quoted (escaped) by syntax_error instead.
    std::string why = e.what();
    if (const size_t p = why.find(": ", why.find("column")); p != std::string::npos) why = why.substr(p + 2);
    if (const size_t p = why.find("; last read: '"); p != std::string::npos) {
      const size_t q = why.find("'; expected", p);
      why = why.substr(0, p) + (q == std::string::npos ? "" : why.substr(q + 1));
    }
    throw syntax_error(at, why);
  } catch (const json::exception& e) {
    throw Error(where + ": not valid JSON: " + printable(e.what(), 200));
  }
  if (nul < text.size()) throw syntax_error(nul, nul_why);
  return out;
}

}  // namespace kimi::model
