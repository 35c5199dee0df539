// model/loader_io.h and its users: every file the loader opens says which file and why it cannot be used
// (missing, a directory, a file where a directory belongs, a FIFO, too large); messages never carry raw file
// bytes; JSON errors give the byte offset; repeated keys are errors.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

#include "expect_error.h"
#include "temp_dir.h"
#include "kimi/model/checkpoint.h"
#include "kimi/model/config.h"
#include "kimi/model/model.h"
#include "kimi/model/safetensors.h"
#include "model/loader_io.h"

namespace kimi::model {
namespace {

namespace fs = std::filesystem;
using testutil::TempDir;
using testutil::error_message_of;

bool all_printable(const std::string& s) {
  for (const char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) return false;
  return true;
}

TEST(LoaderIo, PrintableEscapesEveryNonPrintableByteAndCutsLongInput) {
  EXPECT_EQ(printable("plain text: [1, 2]"), "plain text: [1, 2]");
  EXPECT_EQ(printable(std::string("a\\b\n\t\r\x01\x7f\xff\0z", 11)), "a\\\\b\\n\\t\\r\\x01\\x7f\\xff\\x00z");
  EXPECT_EQ(printable(std::string(100, 'x'), 8), "xxxxxxxx... (100 bytes)");
  EXPECT_EQ(quote("model.w\x1b[31m"), "'model.w\\x1b[31m'");
  EXPECT_EQ(json_excerpt(nlohmann::json("caf\xc3\xa9\x01")), "\"caf\\u00e9\\u0001\"");
  EXPECT_EQ(json_excerpt(nlohmann::json(std::vector<int>(50, 7)), 10), "[7,7,7,7,7... (101 bytes)");
}

TEST(LoaderIo, OpenReasonsNameTheCause) {
  TempDir d;
  std::ofstream(d.file("afile")) << "x";
  EXPECT_EQ(open_error_reason(d.file("missing.json"), ENOENT), "no such file");
  EXPECT_EQ(open_error_reason(d.file("nodir/sub/config.json"), ENOENT),
            "directory '" + d.file("nodir") + "' does not exist");
  EXPECT_EQ(open_error_reason(d.file("afile/config.json"), ENOTDIR),
            "'" + d.file("afile") + "' is a file, not a directory");
  EXPECT_EQ(open_error_reason(d.file("afile"), EACCES),
            "permission denied");  // root here: errno given directly
  fs::create_symlink(d.file("gone"), d.file("link"));
  EXPECT_EQ(open_error_reason(d.file("link"), ENOENT), "a symbolic link to a missing target");
}

TEST(LoaderErrors, ConfigJsonThatIsADirectory) {
  TempDir d;
  fs::create_directories(d.file("config.json"));
  EXPECT_EQ(error_message_of([&] { load_config(d.file("config.json")); }),
            d.file("config.json") + ": cannot open: is a directory, not a file");
  EXPECT_EQ(error_message_of([&] { open_model(d.str()); }),
            d.file("config.json") + ": cannot open: is a directory, not a file");
}

TEST(LoaderErrors, AFileGivenAsTheModelDirectory) {
  TempDir d;
  const std::string f = d.file("model.safetensors");
  std::ofstream(f) << "x";
  EXPECT_EQ(error_message_of([&] { open_model(f); }),
            "model directory " + f +
                ": is a file, not a directory (expected a model directory holding config.json "
                "and model.safetensors, or model.safetensors.index.json and its shards)");
  EXPECT_EQ(error_message_of([&] { load_config(f + "/config.json"); }),
            f + "/config.json: cannot open: '" + f + "' is a file, not a directory");
  // what `kimi generate` and Model(dir) read first: the directory is checked before its config.json
  EXPECT_EQ(error_message_of([&] { load_model_config(f); }),
            "model directory " + f +
                ": is a file, not a directory (expected a model directory holding config.json "
                "and model.safetensors, or model.safetensors.index.json and its shards)");
  EXPECT_EQ(error_message_of([&] { Model m(f, Device::cpu()); }), error_message_of([&] { open_model(f); }));
  EXPECT_EQ(error_message_of([&] { Checkpoint ck(f); }),
            "checkpoint " + f +
                ": is a file, not a directory (expected a checkpoint directory holding "
                "model.safetensors, or model.safetensors.index.json and its shards)");
}

TEST(LoaderErrors, MissingFilesAndDirectories) {
  TempDir d;
  EXPECT_EQ(error_message_of([&] { open_model(d.file("nope")); }),
            "model directory " + d.file("nope") + ": no such directory");
  EXPECT_EQ(error_message_of([&] { open_model(d.file("a/b")); }),
            "model directory " + d.file("a/b") + ": directory '" + d.file("a") + "' does not exist");
  EXPECT_EQ(error_message_of([&] { open_model(d.str()); }), d.file("config.json") + ": cannot open: no such file");
  EXPECT_EQ(error_message_of([&] { SafetensorsFile f(d.file("x.safetensors")); }),
            "safetensors: " + d.file("x.safetensors") + ": cannot open: no such file");
  fs::create_directories(d.file("dir.safetensors"));
  EXPECT_EQ(error_message_of([&] { SafetensorsFile f(d.file("dir.safetensors")); }),
            "safetensors: " + d.file("dir.safetensors") + ": cannot open: is a directory, not a file");
}

TEST(LoaderErrors, FifoAndOversizedConfig) {
  TempDir d;
  ASSERT_EQ(::mkfifo(d.file("config.json").c_str(), 0600), 0);
  EXPECT_EQ(error_message_of([&] { load_config(d.file("config.json")); }),
            d.file("config.json") + ": cannot open: not a regular file (a FIFO)");
  TempDir big;
  { std::ofstream(big.file("config.json")) << "{}"; }
  fs::resize_file(big.file("config.json"), 17u << 20);  // sparse: nothing is written
  EXPECT_EQ(
      error_message_of([&] { load_config(big.file("config.json")); }),
      big.file("config.json") + ": file of 17825792 bytes exceeds the limit of 16777216 bytes for this file");
}

TEST(LoaderErrors, IndexAndShardsThatCannotBeOpened) {
  TempDir d;
  fs::create_directories(d.file("model.safetensors.index.json"));
  EXPECT_EQ(error_message_of([&] { Checkpoint ck(d.str()); }),
            "safetensors index: " + d.file("model.safetensors.index.json") +
                ": cannot open: is a directory, not a file");
  fs::remove(d.file("model.safetensors.index.json"));
  std::ofstream(d.file("model.safetensors.index.json")) << R"({"weight_map":{"x.a":"s1.safetensors"}})";
  EXPECT_EQ(error_message_of([&] { Checkpoint ck(d.str()); }),
            "safetensors: " + d.file("s1.safetensors") + ": cannot open: no such file");
  fs::create_directories(d.file("s1.safetensors"));
  EXPECT_EQ(error_message_of([&] { Checkpoint ck(d.str()); }),
            "safetensors: " + d.file("s1.safetensors") + ": cannot open: is a directory, not a file");
}

TEST(LoaderErrors, JsonErrorsGiveTheByteOffsetAndNoRawBytes) {
  // Random bytes as config.json: the offending byte is escaped and its offset given.
  const std::string junk("{\"vocab_size\": \x00\xff\x80\x1b[2J", 22);
  const std::string msg = error_message_of([&] { parse_config(junk, "/m/config.json"); });
  EXPECT_TRUE(all_printable(msg)) << msg;
  EXPECT_EQ(
      msg,
      "/m/config.json: not valid JSON at byte 15 (line 1, column 16): a NUL byte, which JSON text never "
      "contains; the bytes up to there: '{\"vocab_size\": \\x00'");
  EXPECT_EQ(
      error_message_of([&] { parse_config("{\"vocab_size\": \xff\x80", "/m/config.json"); }),
      "/m/config.json: not valid JSON at byte 15 (line 1, column 16): syntax error while parsing value - "
      "invalid literal; the bytes up to there: '{\"vocab_size\": \\xff'");
  // NUL ends nlohmann's input: a complete value followed by a NUL and more must still be an error.
  EXPECT_EQ(
      error_message_of([&] { parse_config(std::string("{}\0{}", 5), "c.json"); }),
      "c.json: not valid JSON at byte 2 (line 1, column 3): a NUL byte, which JSON text never contains; the "
      "bytes up to there: '{}\\x00'");
  // Across lines, and at the end of the text.
  EXPECT_EQ(
      error_message_of([&] { parse_config("{\n  \"a\": 1,\n  oops\n}", "c.json"); }),
      "c.json: not valid JSON at byte 14 (line 3, column 3): syntax error while parsing object key - invalid "
      "literal; expected string literal; the bytes up to there: '{\\n  \"a\": 1,\\n  o'");
  EXPECT_EQ(
      error_message_of([&] { parse_config("{\"a\": [1, 2", "c.json"); }),
      "c.json: not valid JSON at byte 11 (line 1, column 12): syntax error while parsing array - unexpected "
      "end of input; expected ']' (the text ends there)");
  // A safetensors header of binary junk: the offset is the file's (header starts at byte 8).
  TempDir d;
  const std::string header("{\"t\": \xfe\xff}", 9);
  {
    std::ofstream out(d.file("j.safetensors"), std::ios::binary);
    for (int i = 0; i < 8; ++i) out.put(char(i == 0 ? header.size() : 0));
    out << header;
  }
  const std::string st = error_message_of([&] { SafetensorsFile f(d.file("j.safetensors")); });
  EXPECT_TRUE(all_printable(st)) << st;
  EXPECT_EQ(
      st,
      "safetensors: " + d.file("j.safetensors") +
          ": header: not valid JSON at byte 14 of the file (line 1, column 7): syntax error while parsing "
          "value - invalid literal; the bytes up to there: '{\"t\": \\xfe'");
}

TEST(LoaderErrors, RepeatedKeysAreErrors) {
  EXPECT_EQ(error_message_of([&] { parse_json_strict(R"({"a": 1, "b": {"c": [{"d": 1, "d": 2}]}})", "f.json"); }),
            "f.json: key 'd' appears twice in object 'b.c[]' (a JSON key must be unique)");
  EXPECT_EQ(error_message_of([&] { parse_json_strict(R"({"a": 1, "a": 1})", "f.json"); }),
            "f.json: key 'a' appears twice in the top-level object (a JSON key must be unique)");
  // The same key in sibling objects is fine.
  EXPECT_NO_THROW(
      parse_json_strict(R"({"x": {"k": 1}, "y": {"k": 2}, "z": [{"k": 1}, {"k": 2}]})", "f.json"));
  EXPECT_KIMI_ERROR(parse_safetensors_index(R"({"weight_map": {"a": "s1", "a": "s2"}})", "idx.json"),
                    "safetensors index: idx.json: key 'a' appears twice in object 'weight_map'");
}

}  // namespace
}  // namespace kimi::model
