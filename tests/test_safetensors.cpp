// kimi/model/safetensors.h: round trips, sharded checkpoints, and malformed or malicious files.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "expect_error.h"
#include "kimi/model/safetensors.h"

namespace kimi::model {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("kimi-st-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

// A raw safetensors file from a header string and n data bytes.
// The header is padded with spaces to a multiple of 8 bytes (as writers do) unless pad is false.
void write_raw(const std::string& path, std::string header, size_t data_bytes, uint64_t claimed_len = ~0ull,
               bool pad = true) {
  if (pad) header.append((8 - header.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = claimed_len == ~0ull ? header.size() : claimed_len;
  for (int i = 0; i < 8; ++i) out.put(char(n >> (8 * i)));
  out << header << std::string(data_bytes, '\0');
}

TEST(Safetensors, RoundTripsValuesDtypesAndShapes) {
  TempDir d;
  Tensor a(DType::bf16, {3, 5}), b(DType::f32, {7}), c(DType::u8, {2, 16}), e(DType::i32, {0});
  for (int64_t i = 0; i < a.numel(); ++i) a.data_as<uint16_t>()[i] = f32_to_bf16(float(i) - 2.5f);
  for (int64_t i = 0; i < b.numel(); ++i) b.data_as<float>()[i] = 0.25f * float(i);
  for (int64_t i = 0; i < c.numel(); ++i) c.data_as<uint8_t>()[i] = uint8_t(i * 7);
  const TensorToWrite ts[] = {{"model.a", a}, {"model.b", b}, {"model.c", c}, {"empty", e}};
  write_safetensors(d.file("model.safetensors"), ts, {{"format", "pt"}});

  Checkpoint ck(d.str());
  EXPECT_EQ(ck.names(), (std::vector<std::string>{"empty", "model.a", "model.b", "model.c"}));
  const TensorView va = ck.get("model.a");
  EXPECT_EQ(va.dtype, DType::bf16);
  EXPECT_EQ(va.shape_string(), "[3, 5]");
  EXPECT_EQ(std::memcmp(va.data, a.data(), a.nbytes()), 0);
  EXPECT_EQ(std::memcmp(ck.get("model.b").data, b.data(), b.nbytes()), 0);
  EXPECT_EQ(std::memcmp(ck.get("model.c").data, c.data(), c.nbytes()), 0);
  EXPECT_EQ(ck.get("empty").numel(), 0);
  EXPECT_EQ(ck.total_bytes(), a.nbytes() + b.nbytes() + c.nbytes());
  EXPECT_KIMI_ERROR(ck.get("model.missing"), "missing tensor 'model.missing'");
  SafetensorsFile f(d.file("model.safetensors"));
  EXPECT_EQ(f.header().metadata.at("format"), "pt");
}

TEST(Safetensors, ShardedCheckpointFollowsTheIndex) {
  TempDir d;
  Tensor a(DType::f32, {4}), b(DType::f16, {2, 2});
  a.data_as<float>()[3] = 9.f;
  const TensorToWrite s1[] = {{"x.a", a}}, s2[] = {{"x.b", b}};
  write_safetensors(d.file("model-00001-of-00002.safetensors"), s1);
  write_safetensors(d.file("model-00002-of-00002.safetensors"), s2);
  std::ofstream(d.file("model.safetensors.index.json"))
      << R"({"metadata":{},"weight_map":{"x.a":"model-00001-of-00002.safetensors","x.b":"model-00002-of-00002.safetensors"}})";
  Checkpoint ck(d.str());
  EXPECT_EQ(static_cast<const float*>(ck.get("x.a").data)[3], 9.f);
  EXPECT_EQ(ck.get("x.b").dtype, DType::f16);
}

TEST(Safetensors, RejectsMalformedHeaders) {
  TempDir d;
  const std::string p = d.file("bad.safetensors");
  auto expect_bad = [&](const std::string& header, size_t data, std::initializer_list<const char*> frags,
                        uint64_t claimed = ~0ull, bool pad = true) {
    write_raw(p, header, data, claimed, pad);
    try {
      SafetensorsFile f(p);
      ADD_FAILURE() << "accepted: " << header;
    } catch (const Error& e) {
      for (const char* frag : frags) EXPECT_NE(std::string(e.what()).find(frag), std::string::npos) << e.what();
    }
  };
  expect_bad("", 0, {"header length"}, 1000);                         // claims more than the file has
  expect_bad("{}", 0, {"256 MiB"}, 1ull << 40);                        // absurd header length
  expect_bad("{not json", 0, {"not valid JSON"});
  expect_bad("[1,2]", 0, {"not a JSON object"});
  expect_bad(R"({"t":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", 8, {"'t'", "unsupported dtype 'F64'"});
  expect_bad(R"({"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4, {"'t'", "non-negative"});
  expect_bad(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4, {"'t'", "expected 8 bytes", "span 4"});
  expect_bad(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4, {"'t'", "beyond the data section"});
  expect_bad(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8, {"'t'", "begin 8 > end 0"});
  expect_bad(R"({"t":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0, {"'t'", "overflow"});
  expect_bad(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"z":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
             16, {"overlap"});
  expect_bad(R"({"t":{"dtype":"F32","shape":[1]}})", 4, {"data_offsets"});
  expect_bad(R"({"t":{"dtype":"U8","shape":[0,4611686018427387904,4611686018427387904],"data_offsets":[0,0]}})", 0,
             {"'t'", "overflow"});  // empty, but its extents would overflow index math
  // 2-byte elements at an odd file offset (an unpadded 55-byte header: data starts at 63)
  expect_bad(R"({"t":{"dtype":"BF16","shape":[1],"data_offsets":[0,2]}})", 2, {"'t'", "not aligned"}, ~0ull, false);
  expect_bad(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})", 6, {"'t'", "not aligned"});
  expect_bad(R"({"__metadata__":{"k":1}})", 0, {"__metadata__"});
}

TEST(Safetensors, RejectsMaliciousIndexes) {
  EXPECT_KIMI_ERROR(parse_safetensors_index(R"({"weight_map":{"a":"../etc/passwd"}})", "idx"), "'a'", "plain file name");
  EXPECT_KIMI_ERROR(parse_safetensors_index(R"({"weight_map":{"a":"/abs.safetensors"}})", "idx"), "plain file name");
  EXPECT_KIMI_ERROR(parse_safetensors_index(R"({"weight_map":{"a":3}})", "idx"), "'a'", "not a file name");
  EXPECT_KIMI_ERROR(parse_safetensors_index(R"({"nothing":{}})", "idx"), "weight_map");
  TempDir d;
  Tensor a(DType::f32, {1});
  const TensorToWrite s1[] = {{"x.a", a}};
  write_safetensors(d.file("s1.safetensors"), s1);
  std::ofstream(d.file("model.safetensors.index.json")) << R"({"weight_map":{"x.a":"s1.safetensors","x.b":"s1.safetensors"}})";
  EXPECT_KIMI_ERROR(Checkpoint ck(d.str()), "'x.b'", "does not contain it");
  TempDir empty;
  EXPECT_KIMI_ERROR(Checkpoint ck(empty.str()), "neither model.safetensors");
}

}  // namespace
}  // namespace kimi::model
