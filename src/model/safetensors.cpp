// Implementation of kimi/model/safetensors.h.
#include "kimi/model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "kimi/error.h"

namespace kimi::model {

namespace {
using json = nlohmann::json;
constexpr uint64_t kMaxHeader = 256ull << 20;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error("safetensors: " + path + ": " + what);
}

DType parse_dtype(const std::string& s, const std::string& path, const std::string& name) {
  if (s == "F32") return DType::f32;
  if (s == "BF16") return DType::bf16;
  if (s == "F16") return DType::f16;
  if (s == "U8") return DType::u8;
  if (s == "I32") return DType::i32;
  if (s == "I64") return DType::i64;
  fail(path, "tensor '" + name + "': unsupported dtype '" + s + "' (expected F32, BF16, F16, U8, I32 or I64)");
}

std::string dtype_tag(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::bf16: return "BF16";
    case DType::f16: return "F16";
    case DType::u8: return "U8";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
  }
  return "?";
}

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
}  // namespace

SafetensorsHeader parse_safetensors_header(std::span<const uint8_t> file, uint64_t file_size, const std::string& path) {
  if (file_size < 8 || file.size() < 8) fail(path, "file of " + std::to_string(file_size) + " bytes is shorter than the 8-byte header length");
  const uint64_t n = read_u64_le(file.data());
  if (n > kMaxHeader) fail(path, "header length " + std::to_string(n) + " exceeds the 256 MiB limit");
  if (n > file_size - 8) fail(path, "header length " + std::to_string(n) + " exceeds the file size " + std::to_string(file_size));
  if (n > file.size() - 8) fail(path, "header length " + std::to_string(n) + " exceeds the bytes given");
  json h;
  try {
    h = json::parse(file.begin() + 8, file.begin() + 8 + std::ptrdiff_t(n));
  } catch (const json::exception& e) {
    fail(path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!h.is_object()) fail(path, "header is not a JSON object");
  const uint64_t data_size = file_size - 8 - n;
  SafetensorsHeader out;
  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) fail(path, "__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) fail(path, "__metadata__ value of '" + m.key() + "' is not a string");
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + name + "'";
    if (!v.is_object()) fail(path, where + " is not an object");
    if (!v.contains("dtype") || !v["dtype"].is_string()) fail(path, where + ": missing string 'dtype'");
    if (!v.contains("shape") || !v["shape"].is_array()) fail(path, where + ": missing array 'shape'");
    if (!v.contains("data_offsets") || !v["data_offsets"].is_array() || v["data_offsets"].size() != 2)
      fail(path, where + ": missing 'data_offsets' [begin, end]");
    TensorInfo t;
    t.name = name;
    t.dtype = parse_dtype(v["dtype"].get<std::string>(), path, name);
    if (v["shape"].size() > size_t(kMaxDims)) fail(path, where + ": more than 6 dimensions");
    uint64_t count = 1, nonzero = 1;  // nonzero: product of the non-zero extents (bounds index math)
    for (const json& d : v["shape"]) {
      if (!d.is_number_unsigned()) fail(path, where + ": shape entries must be non-negative integers");
      const uint64_t s = d.get<uint64_t>();
      constexpr uint64_t kMax = uint64_t(std::numeric_limits<int64_t>::max());
      if (s > kMax || (s && nonzero > kMax / s)) fail(path, where + ": shape overflows");
      count *= s;
      if (s) nonzero *= s;
      t.shape.push_back(int64_t(s));
    }
    const json& off = v["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      fail(path, where + ": data_offsets must be non-negative integers");
    const uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
    const uint64_t es = uint64_t(dtype_size(t.dtype));
    if (count > std::numeric_limits<uint64_t>::max() / es) fail(path, where + ": byte size overflows");
    if (b > e) fail(path, where + ": data_offsets begin " + std::to_string(b) + " > end " + std::to_string(e));
    if (e > data_size)
      fail(path, where + ": data_offsets end " + std::to_string(e) + " beyond the data section of " + std::to_string(data_size) + " bytes (file truncated?)");
    if (e - b != count * es)
      fail(path, where + ": expected " + std::to_string(count * es) + " bytes for shape and dtype, data_offsets span " + std::to_string(e - b));
    t.begin = 8 + n + b;
    if (e != b && t.begin % es != 0)
      fail(path, where + ": data at file offset " + std::to_string(t.begin) + " is not aligned to its " +
                     std::to_string(es) + "-byte elements");
    t.nbytes = e - b;
    out.tensors.push_back(std::move(t));
  }
  std::sort(out.tensors.begin(), out.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.nbytes < b.nbytes;
  });
  // Sorted by begin: a tensor overlaps an earlier one iff it starts before the furthest end seen so far.
  const TensorInfo* furthest = nullptr;
  for (const TensorInfo& c : out.tensors) {
    if (c.nbytes == 0) continue;
    if (furthest && c.begin < furthest->begin + furthest->nbytes)
      fail(path, "tensors '" + furthest->name + "' and '" + c.name + "' overlap");
    if (!furthest || c.begin + c.nbytes > furthest->begin + furthest->nbytes) furthest = &c;
  }
  std::sort(out.tensors.begin(), out.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
  return out;
}

std::map<std::string, std::string> parse_safetensors_index(std::string_view text, const std::string& path) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error("safetensors index: " + path + ": not valid JSON: " + e.what());
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    throw Error("safetensors index: " + path + ": expected an object with a 'weight_map' object");
  std::map<std::string, std::string> out;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    if (!it.value().is_string())
      throw Error("safetensors index: " + path + ": weight_map entry '" + it.key() + "' is not a file name string");
    const std::string f = it.value().get<std::string>();
    if (f.empty() || f.find('/') != std::string::npos || f.find('\\') != std::string::npos || f == "." || f == "..")
      throw Error("safetensors index: " + path + ": weight_map entry '" + it.key() + "': shard '" + f +
                  "' is not a plain file name in the checkpoint directory");
    out[it.key()] = f;
  }
  return out;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "not a regular file");
  }
  size_ = size_t(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      fail(path, std::string("mmap failed: ") + std::strerror(errno));
    }
    map_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  try {
    header_ = parse_safetensors_header(std::span<const uint8_t>(map_, size_), size_, path);
  } catch (...) {
    if (map_) ::munmap(const_cast<uint8_t*>(map_), size_);
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(const_cast<uint8_t*>(map_), size_);
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  auto it = std::lower_bound(header_.tensors.begin(), header_.tensors.end(), name,
                             [](const TensorInfo& t, std::string_view n) { return t.name < n; });
  return it != header_.tensors.end() && it->name == name ? &*it : nullptr;
}

TensorView SafetensorsFile::view(const TensorInfo& t) const {
  // NOTE: the mapping is read-only; TensorView has no const flavour, so writes through it fault.
  return TensorView(const_cast<uint8_t*>(map_) + t.begin, t.dtype, t.shape);
}

Checkpoint::Checkpoint(const std::string& dir) : dir_(dir) {
  namespace fs = std::filesystem;
  const fs::path d(dir);
  const fs::path index = d / "model.safetensors.index.json", single = d / "model.safetensors";
  if (fs::exists(index)) {
    std::ifstream in(index, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto map = parse_safetensors_index(text, index.string());
    std::map<std::string, const SafetensorsFile*> opened;
    for (const auto& [name, shard] : map) {
      if (!opened.count(shard)) {
        files_.push_back(std::make_unique<SafetensorsFile>((d / shard).string()));
        opened[shard] = files_.back().get();
      }
      const SafetensorsFile* f = opened[shard];
      const TensorInfo* t = f->find(name);
      if (!t) throw Error("checkpoint " + dir + ": index maps tensor '" + name + "' to " + shard + ", which does not contain it");
      index_[name] = {f, t};
    }
  } else if (fs::exists(single)) {
    files_.push_back(std::make_unique<SafetensorsFile>(single.string()));
    for (const TensorInfo& t : files_.back()->header().tensors) index_[t.name] = {files_.back().get(), &t};
  } else {
    throw Error("checkpoint " + dir + ": neither model.safetensors nor model.safetensors.index.json found");
  }
}

bool Checkpoint::has(std::string_view name) const { return index_.find(name) != index_.end(); }

const TensorInfo& Checkpoint::info(std::string_view name) const {
  auto it = index_.find(name);
  if (it == index_.end()) throw Error("checkpoint " + dir_ + ": missing tensor '" + std::string(name) + "'");
  return *it->second.second;
}

TensorView Checkpoint::get(std::string_view name) const {
  auto it = index_.find(name);
  if (it == index_.end()) throw Error("checkpoint " + dir_ + ": missing tensor '" + std::string(name) + "'");
  return it->second.first->view(*it->second.second);
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> v;
  for (const auto& [n, _] : index_) v.push_back(n);
  return v;
}

uint64_t Checkpoint::total_bytes() const {
  uint64_t b = 0;
  for (const auto& [_, e] : index_) b += e.second->nbytes;
  return b;
}

void write_safetensors(const std::string& path, std::span<const TensorToWrite> tensors,
                       const std::map<std::string, std::string>& metadata) {
  // Data in order of element size, largest first (stable): with the header padded to 8 bytes every
  // tensor then starts aligned to its elements, as the safetensors library lays files out.
  std::vector<const TensorToWrite*> order;
  for (const TensorToWrite& t : tensors) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const TensorToWrite* a, const TensorToWrite* b) {
    return a->data.element_size() > b->data.element_size();
  });
  json h = json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  uint64_t off = 0;
  for (const TensorToWrite* tp : order) {
    const TensorToWrite& t = *tp;
    if (!t.data.is_contiguous() || t.data.device.type != DeviceType::cpu)
      throw Error("write_safetensors: tensor '" + t.name + "' must be a contiguous CPU tensor");
    const uint64_t nb = uint64_t(t.data.numel()) * t.data.element_size();
    h[t.name] = {{"dtype", dtype_tag(t.data.dtype)},
                 {"shape", std::vector<int64_t>(t.data.shape.begin(), t.data.shape.begin() + t.data.ndim)},
                 {"data_offsets", {off, off + nb}}};
    off += nb;
  }
  std::string text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error("write_safetensors: cannot create " + path);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(text.size()) >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(text.data(), std::streamsize(text.size()));
  for (const TensorToWrite* t : order)
    out.write(static_cast<const char*>(t->data.data), std::streamsize(uint64_t(t->data.numel()) * t->data.element_size()));
  if (!out) throw Error("write_safetensors: write to " + path + " failed");
}

}  // namespace kimi::model
