// model/loader_io.h: reading the files a user hands the checkpoint loader (config.json, the safetensors
// index, the shards), so that every failure is a kimi::Error that names the file and says why.
//
// - Opening: "<path>: cannot open: <reason>", the reason from errno and the file system: "no such file",
//   "directory '/a/b' does not exist", "'/a/model.bin' is a file, not a directory", "is a directory, not a
//   file", "permission denied", "not a regular file (a FIFO)". Sizes are checked against a limit before a
//   byte is read or allocated.
// - Bytes from a file never reach a message raw: printable() escapes everything but printable ASCII
//   (\n, \t, \r, \\, \xNN) and cuts long input, so messages stay one readable line whatever the file holds.
// - JSON is parsed strictly: a syntax error names the file and the byte offset (in the file) and quotes the
//   bytes around it, escaped; a key that appears twice in one object is an error naming the key (nlohmann
//   would silently keep the last one, which hides a corrupt or hand-merged file).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace kimi::model {

// `bytes` as printable ASCII: ' '..'~' kept (backslash doubled), \n \r \t escaped, every other byte \xNN.
// Input beyond max_bytes is dropped and "... (N bytes)" appended, N the full input length.
std::string printable(std::string_view bytes, size_t max_bytes = 64);
// printable(s) in single quotes: how the loader names tensors, keys and shard files in messages.
std::string quote(std::string_view s, size_t max_bytes = 256);
// A JSON value for a message: compact, control and non-ASCII characters as \uXXXX (printable ASCII only),
// cut to max_bytes like printable().
std::string json_excerpt(const nlohmann::json& v, size_t max_bytes = 80);

// Why opening `path` failed with errno `err`, in words (see the header comment).
std::string open_error_reason(const std::string& path, int err);
// Throws "<prefix><dir>: <reason>" unless dir is an existing, searchable directory. `expected` says what
// the directory should hold (for the "is a file" case).
void require_directory(const std::string& dir, const std::string& prefix, const std::string& expected);
// The whole file as bytes. Throws "<prefix><path>: cannot open: <reason>" or, when the file is larger than
// max_bytes, a message giving both sizes (checked before anything is allocated).
std::string read_text_file(const std::string& path, const std::string& prefix, uint64_t max_bytes);

// Strict JSON parse of `text`. `where` starts every message (e.g. "config.json" or "safetensors: f: header");
// base_offset is the file offset of text[0] (8 for a safetensors header), so offsets are the file's.
nlohmann::json parse_json_strict(std::string_view text, const std::string& where, uint64_t base_offset = 0);

}  // namespace kimi::model
