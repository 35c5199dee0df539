// kimi/model/safetensors.h: memory-mapped Hugging Face safetensors checkpoints (SPEC 11).
//
// File format: an 8-byte little-endian header length N, N bytes of JSON
//   {"__metadata__": {"k": "v", ...}, "<name>": {"dtype": "BF16", "shape": [..], "data_offsets": [b, e]}, ...}
// then the data; offsets are relative to the end of the header. A checkpoint directory holds either
// `model.safetensors` or `model.safetensors.index.json` ({"weight_map": {"<name>": "<shard file>"}}) and shards.
//
// Everything read from a file is validated before use: header length within the file and <= 256 MiB,
// JSON well formed, known dtypes (F32, BF16, F16, U8, I32, I64), non-negative shapes whose byte size matches
// the offsets (no overflow), offsets inside the data section, no two tensors overlapping, shard names plain
// file names (no '/' or '..'), every indexed tensor present in its shard. Violations throw kimi::Error
// naming the file and the tensor. Tensors are views into the read-only mapping: loading copies nothing.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kimi/tensor.h"

namespace kimi::model {

struct TensorInfo {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;   // byte offset of the data from the start of the FILE
  uint64_t nbytes = 0;
};

// Parses and validates a safetensors header. `file` is the whole file's bytes (or at least its first
// 8 + N bytes when file_size says more): used by SafetensorsFile and by the fuzz target.
struct SafetensorsHeader {
  std::vector<TensorInfo> tensors;           // sorted by name
  std::map<std::string, std::string> metadata;
};
SafetensorsHeader parse_safetensors_header(std::span<const uint8_t> file, uint64_t file_size,
                                           const std::string& path);

// Parses model.safetensors.index.json: tensor name -> shard file name (validated plain file names).
std::map<std::string, std::string> parse_safetensors_index(std::string_view json, const std::string& path);

// One memory-mapped .safetensors file.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const SafetensorsHeader& header() const { return header_; }
  const TensorInfo* find(std::string_view name) const;  // nullptr when absent
  TensorView view(const TensorInfo& t) const;           // CPU view into the mapping (read-only memory)

 private:
  std::string path_;
  const uint8_t* map_ = nullptr;
  size_t size_ = 0;
  SafetensorsHeader header_;
};

// A checkpoint directory (single file or sharded).
class Checkpoint {
 public:
  explicit Checkpoint(const std::string& dir);
  bool has(std::string_view name) const;
  // The tensor's view; throws kimi::Error naming the tensor and the directory when absent.
  TensorView get(std::string_view name) const;
  const TensorInfo& info(std::string_view name) const;
  std::vector<std::string> names() const;  // sorted
  uint64_t total_bytes() const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, std::pair<const SafetensorsFile*, const TensorInfo*>, std::less<>> index_;
};

// Writes a safetensors file (for `kimi random-model`, tests and tools). Tensors are written in the
// given order, contiguous, 8-byte aligned header as the format recommends.
struct TensorToWrite {
  std::string name;
  TensorView data;  // contiguous CPU tensor
};
void write_safetensors(const std::string& path, std::span<const TensorToWrite> tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace kimi::model
