// kimi/model/safetensors.h: memory-mapped Hugging Face safetensors checkpoints (SPEC 11).
//
// File format: an 8-byte little-endian header length N, N bytes of JSON
//   {"__metadata__": {"k": "v", ...},
//    "<name>": {"dtype": "BF16", "shape": [..], "data_offsets": [b, e]}, ...}
// then the data; offsets are relative to the end of the header. A checkpoint directory holds either
// `model.safetensors`, or `model.safetensors.index.json` ({"weight_map": {"<name>": "<shard file>"}})
// and the shards.
//
// Accepted files are exactly those the reference `safetensors` library (0.8) accepts, except where noted:
// - N <= 100,000,000 (the library's limit) and 8 + N <= file size; the header is UTF-8 JSON, whitespace
//   (space, tab, CR, LF) allowed around the object (writers pad with spaces to a multiple of 8; unpadded
//   headers are valid too), no byte order mark, nothing else after the object.
// - "__metadata__": an object of strings, or null. Every other key is a tensor: an object with "dtype",
//   "shape" (non-negative integers) and "data_offsets" [begin, end], other fields ignored; end - begin is
//   exactly the shape's element count times the dtype's size.
// - Sorted by (begin, end), each tensor starts where the previous one ends and the last ends at the end
//   of the file: no holes, no overlaps, no trailing bytes; a zero-size tensor sits on a boundary.
// - The data need not be aligned: a tensor whose first element is not at a multiple of its element size
//   (unpadded header, or any order of element sizes) is copied once into an aligned buffer when the file is
//   opened; aligned tensors are views into the read-only mapping (no copy).
// Stricter than the library: a key that appears twice in any JSON object is an error (the library rejects a
// repeated field of a tensor entry but keeps the last of two equal tensor keys or metadata keys); dtypes are
// F32, BF16, F16, U8, I32, I64 only; at most 6 dimensions. In a sharded checkpoint shard names are plain file
// names (no '/', '..' or control characters), every indexed tensor is in its shard, and no tensor is in two
// shards.
// Every violation throws kimi::Error naming the file and the tensor or key (escaped: file bytes never reach a
// message raw, see model/loader_io.h).
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
  // CPU view of the tensor's data, aligned to its elements: into the mapping (read-only memory), or into the
  // copy of a misaligned tensor.
  TensorView view(const TensorInfo& t) const;
  uint64_t copied_bytes() const { return copied_bytes_; }  // bytes held in the aligned copy (0: all views)

 private:
  void place_data();  // fills data_, copying misaligned tensors

  std::string path_;
  const uint8_t* map_ = nullptr;
  size_t size_ = 0;
  SafetensorsHeader header_;
  std::vector<const uint8_t*> data_;    // per header_.tensors entry: where its elements are
  std::unique_ptr<uint64_t[]> copies_;  // misaligned tensors, each at a multiple of 8 bytes
  uint64_t copied_bytes_ = 0;
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

// Writes a safetensors file (for `kimi random-model`, tests and tools): header padded with spaces to a
// multiple of 8 bytes, tensors contiguous, largest element size first, so every tensor is aligned (the
// layout the safetensors library writes).
struct TensorToWrite {
  std::string name;
  TensorView data;  // contiguous CPU tensor
};
void write_safetensors(const std::string& path, std::span<const TensorToWrite> tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace kimi::model
