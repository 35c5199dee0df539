// kimi/model/safetensors.h: round trips, sharded checkpoints, and malformed or malicious files.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "expect_error.h"
#include "temp_dir.h"
#include "kimi/model/safetensors.h"

namespace kimi::model {
namespace {

namespace fs = std::filesystem;

using testutil::TempDir;

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

// The message of the kimi::Error that opening `path` throws.
std::string error_of_file(const std::string& path) {
  return testutil::error_message_of([&] { SafetensorsFile f(path); });
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
  expect_bad("{}", 0, {"header length 1099511627776", "safetensors limit of 100000000 bytes"}, 1ull << 40);
  expect_bad("{}", 0, {"header length 100000001"}, 100000001);  // the library's limit, exactly
  expect_bad("{not json", 0, {"header: not valid JSON at byte 10 of the file (line 1, column 3)"});
  expect_bad("[1,2]", 0, {"expected a JSON object, got [1,2]"});
  expect_bad(R"({"t":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", 8, {"'t'", "unsupported dtype 'F64'"});
  expect_bad(R"({"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4,
             {"tensor 't': 'shape': expected an array of non-negative integers, got [-1]"});
  expect_bad(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4,
             {"tensor 't': expected 8 bytes for shape [2] and dtype F32, data_offsets [0, 4] span 4"});
  expect_bad(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4, {"'t'", "beyond the data section"});
  expect_bad(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8, {"'t'", "begin 8 > end 0"});
  expect_bad(R"({"t":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0, {"'t'", "overflow"});
  expect_bad(
      R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"z":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
      16, {"tensors 'a' (data_offsets [0, 16]) and 'z' (data_offsets [4, 4]) overlap"});
  expect_bad(R"({"t":{"dtype":"F32","shape":[1]}})", 4,
             {"tensor 't': 'data_offsets': expected [begin, end], two non-negative integers, got nothing "
              "(missing)"});
  expect_bad(R"({"t":{"dtype":"U8","shape":[0,4611686018427387904,4611686018427387904],"data_offsets":[0,0]}})", 0,
             {"'t'", "overflow"});  // empty, but its extents would overflow index math
  expect_bad(R"({"__metadata__":{"k":1}})", 0, {"__metadata__ entry 'k': expected a string, got 1"});
}

// What the safetensors library (0.8) refuses, kimi refuses too, saying what is wrong and where. The same
// inputs are checked against the library itself by tests/safetensors_reference (when Python has it).
TEST(Safetensors, RejectsWhatTheSafetensorsLibraryRejects) {
  TempDir d;
  const std::string p = d.file("bad.safetensors");
  auto error = [&](const std::string& header, size_t data_bytes) {
    write_raw(p, header, data_bytes, ~0ull, /*pad=*/false);
    const std::string m = error_of_file(p), prefix = "safetensors: " + p + ": ";
    const bool prefixed = m.rfind(prefix, 0) == 0;
    EXPECT_TRUE(prefixed) << header << ": " << m;
    return prefixed ? m.substr(prefix.size()) : m;
  };
  const std::string a8 = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  EXPECT_EQ(
      error(
          R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
          12),
      "bytes [4, 8) of the data section belong to no tensor (between 'a' and 'b'); safetensors requires the "
      "tensors to cover the data section without gaps");
  EXPECT_EQ(error(R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8),
            "bytes [0, 4) of the data section belong to no tensor (between the header and 'b'); safetensors "
            "requires "
            "the tensors to cover the data section without gaps");
  EXPECT_EQ(
      error("{" + a8 + "}", 12),
      "the tensors end at byte 8 of the data section, which holds 12 bytes: the last 4 bytes belong to no "
      "tensor (safetensors requires the tensors to cover the data section exactly)");
  EXPECT_EQ(
      error("{}", 1),
      "the tensors end at byte 0 of the data section, which holds 1 bytes: the last 1 bytes belong to no "
      "tensor (safetensors requires the tensors to cover the data section exactly)");
  EXPECT_EQ(error("{" + a8 + R"(,"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8),
            "tensors 'a' (data_offsets [0, 8]) and 'b' (data_offsets [4, 8]) overlap");
  EXPECT_EQ(error("{" + a8 + R"(,"z":{"dtype":"F32","shape":[0],"data_offsets":[9,9]}})", 8),
            "tensor 'z': data_offsets end 9 beyond the data section of 8 bytes (file truncated?)");
  EXPECT_EQ(
      error("\xEF\xBB\xBF{}", 0),
      "header starts with a UTF-8 byte order mark (bytes 8..10: EF BB BF), which safetensors does not allow");
  EXPECT_EQ(
      error(std::string("{}\0\0", 4), 0),
      "header: not valid JSON at byte 10 of the file (line 1, column 3): a NUL byte, which JSON text never "
      "contains; the bytes up to there: '{}\\x00'");
  EXPECT_EQ(
      error("", 0),
      "header: not valid JSON at byte 8 of the file (line 1, column 1): syntax error while parsing value - "
      "unexpected end of input; expected '[', '{', or a literal (the text ends there)");
  EXPECT_EQ(error(R"({"t":{"dtype":"F64","dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8),
            "header: key 'dtype' appears twice in object 't' (a JSON key must be unique)");
  EXPECT_EQ(error(R"({"__metadata__":{},"__metadata__":{}})", 0),
            "header: key '__metadata__' appears twice in the top-level object (a JSON key must be unique)");
  EXPECT_EQ(error(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0.0,8]}})", 8),
            "tensor 't': 'data_offsets': expected [begin, end], two non-negative integers, got [0.0,8]");
  EXPECT_EQ(error(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}})", 8),
            "tensor 't': 'data_offsets': expected [begin, end], two non-negative integers, got [0,8,8]");
  EXPECT_EQ(error(R"({"t":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", 8),
            "tensor 't': 'shape': expected an array of non-negative integers, got [2.0]");
  EXPECT_EQ(error(R"({"t":{"dtype":"f32","shape":[2],"data_offsets":[0,8]}})", 8),
            "tensor 't': unsupported dtype 'f32' (kimi reads F32, BF16, F16, U8, I32 and I64)");
  EXPECT_EQ(error(R"({"t":null})", 0),
            "tensor 't': expected an object {\"dtype\", \"shape\", \"data_offsets\"}, got null");
  EXPECT_EQ(error(R"({"__metadata__":[]})", 0), "__metadata__: expected an object of strings, got []");
  EXPECT_EQ(error(R"({"__metadata__":{"a":{"b":"c"}}})", 0),
            "__metadata__ entry 'a': expected a string, got {\"b\":\"c\"}");
  EXPECT_EQ(
      error("{\"t\xff\":1}", 0),
      "header: not valid JSON at byte 11 of the file (line 1, column 4): syntax error while parsing object "
      "key - "
      "invalid string: ill-formed UTF-8 byte; expected string literal; the bytes up to there: '{\"t\\xff'");
}

// Stricter than the library, on purpose: a tensor named twice is ambiguous (the library keeps the last).
TEST(Safetensors, RejectsATensorNamedTwice) {
  TempDir d;
  const std::string p = d.file("dup.safetensors");
  write_raw(
      p,
      R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
      8);
  EXPECT_EQ(error_of_file(p),
            "safetensors: " + p +
                ": header: key 't' appears twice in the top-level object (a JSON key must be unique)");
}

// Files the library accepts that the old reader refused or mishandled: unpadded headers (data right after
// the header, elements at any address), whitespace around the JSON, null metadata, empty and 0-d tensors,
// tensors listed in any order, extra fields.
TEST(Safetensors, AcceptsUnpaddedHeadersAndMisalignedData) {
  TempDir d;
  const std::string p = d.file("unpadded.safetensors");
  std::string data;
  auto put = [&](const void* v, size_t n) { data.append(static_cast<const char*>(v), n); };
  const float f[3] = {1.5f, -2.25f, 3e-8f};
  const int64_t q[2] = {-5, int64_t(1) << 40};
  const uint16_t h[3] = {f32_to_bf16(0.5f), f32_to_bf16(-7.f), f32_to_bf16(96.f)};
  const uint8_t u[2] = {9, 250};
  put(f, 12), put(q, 16), put(h, 6), put(u, 2);
  std::string header =
      R"({"d":{"dtype":"U8","shape":[2],"data_offsets":[34,36]},"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},)"
      R"("c":{"dtype":"BF16","shape":[3],"data_offsets":[28,34],"note":"extra fields are ignored"},)"
      R"("b":{"dtype":"I64","shape":[2],"data_offsets":[12,28]},"e":{"dtype":"F32","shape":[0,4],"data_offsets":[36,36]},)"
      R"("__metadata__":null})";
  header.append((9 - header.size() % 8) % 8, ' ');  // 8 + N = 1 (mod 8): every wider element is misaligned
  ASSERT_EQ((8 + header.size()) % 8, 1u);
  {
    std::ofstream out(p, std::ios::binary);
    for (int i = 0; i < 8; ++i) out.put(char(uint64_t(header.size()) >> (8 * i)));
    out << header << data;
  }
  SafetensorsFile st(p);
  EXPECT_TRUE(st.header().metadata.empty());
  EXPECT_EQ(st.copied_bytes(), 16u + 16u + 8u);  // a, b, c (each rounded up to 8); d is bytes, e empty
  auto aligned = [](const TensorView& v) {
    return reinterpret_cast<uintptr_t>(v.data) % v.element_size() == 0;
  };
  const TensorView a = st.view(*st.find("a")), b = st.view(*st.find("b")), c = st.view(*st.find("c")),
                   dv = st.view(*st.find("d")), e = st.view(*st.find("e"));
  EXPECT_TRUE(aligned(a) && aligned(b) && aligned(c));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(static_cast<const float*>(a.data)[i], f[i]);
  EXPECT_EQ(static_cast<const int64_t*>(b.data)[0], -5);
  EXPECT_EQ(static_cast<const int64_t*>(b.data)[1], int64_t(1) << 40);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(static_cast<const uint16_t*>(c.data)[i], h[i]);
  EXPECT_EQ(c.dtype, DType::bf16);
  EXPECT_EQ(static_cast<const uint8_t*>(dv.data)[1], 250);
  EXPECT_EQ(e.shape_string(), "[0, 4]");
  // Through a checkpoint directory as well.
  fs::rename(p, d.file("model.safetensors"));
  Checkpoint ck(d.str());
  EXPECT_EQ(static_cast<const float*>(ck.get("a").data)[1], -2.25f);
  EXPECT_EQ(ck.names(), (std::vector<std::string>{"a", "b", "c", "d", "e"}));
}

TEST(Safetensors, AcceptsWhitespaceScalarsAndEmptyTensorsOnBoundaries) {
  TempDir d;
  const std::string p = d.file("ok.safetensors");
  // Leading and trailing JSON whitespace; a 0-d tensor (one element); empty tensors at the start, between
  // tensors and at the end; a header with nothing but metadata.
  const float one = 4.f, two[2] = {5.f, 6.f};
  std::string data(reinterpret_cast<const char*>(&one), 4);
  data.append(reinterpret_cast<const char*>(two), 8);
  const std::string header =
      " \n\t{\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
      "\"z0\":{\"dtype\":\"I32\",\"shape\":[0],\"data_offsets\":[0,0]},"
      "\"z1\":{\"dtype\":\"F16\",\"shape\":[2,0],\"data_offsets\":[4,4]},"
      "\"v\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]},"
      "\"z2\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[12,12]}} \r\n\t   ";
  {
    std::ofstream out(p, std::ios::binary);
    for (int i = 0; i < 8; ++i) out.put(char(uint64_t(header.size()) >> (8 * i)));
    out << header << data;
  }
  SafetensorsFile st(p);
  const TensorView s = st.view(*st.find("s"));
  EXPECT_EQ(s.ndim, 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(*static_cast<const float*>(s.data), 4.f);
  EXPECT_EQ(static_cast<const float*>(st.view(*st.find("v")).data)[1], 6.f);
  EXPECT_EQ(st.view(*st.find("z1")).numel(), 0);
  write_raw(p, R"({"__metadata__":{"format":"pt"}})", 0);
  SafetensorsFile m(p);
  EXPECT_TRUE(m.header().tensors.empty());
  EXPECT_EQ(m.header().metadata.at("format"), "pt");
}

TEST(Safetensors, PaddedFilesAreViewsWithoutCopies) {
  TempDir d;
  Tensor a(DType::u8, {3}), b(DType::f32, {5}), c(DType::bf16, {1});
  const TensorToWrite ts[] = {{"a", a}, {"b", b}, {"c", c}};
  write_safetensors(d.file("model.safetensors"), ts);
  EXPECT_EQ(SafetensorsFile(d.file("model.safetensors")).copied_bytes(), 0u);
}

TEST(Safetensors, RejectsMaliciousIndexes) {
  EXPECT_KIMI_ERROR(parse_safetensors_index(R"({"weight_map":{"a":"../etc/passwd"}})", "idx"), "'a'", "plain file name");
  EXPECT_KIMI_ERROR(parse_safetensors_index(R"({"weight_map":{"a":"/abs.safetensors"}})", "idx"), "plain file name");
  EXPECT_KIMI_ERROR(
      parse_safetensors_index(R"({"weight_map":{"a":"x\u001b[2J.safetensors"}})", "idx"),
      "safetensors index: idx: weight_map entry 'a': shard 'x\\x1b[2J.safetensors' is not a plain file name");
  EXPECT_KIMI_ERROR(parse_safetensors_index(R"({"weight_map":{"a":3}})", "idx"),
                    "safetensors index: idx: weight_map entry 'a': expected a shard file name string, got 3");
  EXPECT_KIMI_ERROR(parse_safetensors_index(R"({"nothing":{}})", "idx"), "weight_map");
  TempDir d;
  Tensor a(DType::f32, {1});
  const TensorToWrite s1[] = {{"x.a", a}};
  write_safetensors(d.file("s1.safetensors"), s1);
  std::ofstream(d.file("model.safetensors.index.json")) << R"({"weight_map":{"x.a":"s1.safetensors","x.b":"s1.safetensors"}})";
  EXPECT_KIMI_ERROR(
      Checkpoint ck(d.str()),
      "model.safetensors.index.json maps tensor 'x.b' to shard 's1.safetensors', which does not contain it");
  TempDir empty;
  EXPECT_KIMI_ERROR(Checkpoint ck(empty.str()), "neither model.safetensors");
}

// A tensor stored in two shards is ambiguous (which copy is read depends on the reader): an error
// naming both shards.
TEST(Safetensors, RejectsATensorInTwoShards) {
  TempDir d;
  Tensor a(DType::f32, {1}), b(DType::f32, {2});
  const TensorToWrite s1[] = {{"x.a", a}}, s2[] = {{"x.a", a}, {"x.b", b}};
  write_safetensors(d.file("s1.safetensors"), s1);
  write_safetensors(d.file("s2.safetensors"), s2);
  std::ofstream(d.file("model.safetensors.index.json"))
      << R"({"weight_map":{"x.a":"s1.safetensors","x.b":"s2.safetensors"}})";
  const std::string want =
      "checkpoint " + d.str() +
      ": tensor 'x.a' is in two shards, 's1.safetensors' and 's2.safetensors' "
      "(model.safetensors.index.json maps it to 's1.safetensors'); each tensor must be stored once";
  EXPECT_KIMI_ERROR(Checkpoint ck(d.str()), want.c_str());
}

}  // namespace
}  // namespace kimi::model
