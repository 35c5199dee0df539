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
#include "model/loader_io.h"

namespace kimi::model {

namespace {
using json = nlohmann::json;
// The safetensors library's MAX_HEADER_SIZE: it refuses longer headers, so does kimi.
constexpr uint64_t kMaxHeader = 100'000'000;
// model.safetensors.index.json: K3's (one entry per tensor, ~500k tensors) is ~60 MB.
constexpr uint64_t kMaxIndexBytes = 1ull << 30;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error("safetensors: " + path + ": " + what);
}

DType parse_dtype(const std::string& s, const std::string& path, const std::string& where) {
  if (s == "F32") return DType::f32;
  if (s == "BF16") return DType::bf16;
  if (s == "F16") return DType::f16;
  if (s == "U8") return DType::u8;
  if (s == "I32") return DType::i32;
  if (s == "I64") return DType::i64;
  fail(path, where + ": unsupported dtype " + quote(s, 32) + " (kimi reads F32, BF16, F16, U8, I32 and I64)");
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

std::string offsets_str(uint64_t b, uint64_t e) {
  return "[" + std::to_string(b) + ", " + std::to_string(e) + "]";
}

// The field `key` of a tensor entry, or nullptr (absent or null).
const json* field(const json& entry, const char* key) {
  auto it = entry.find(key);
  return it == entry.end() || it->is_null() ? nullptr : &*it;
}
std::string got(const json* v) {
  return v ? json_excerpt(*v) : "nothing (missing)";
}
}  // namespace

SafetensorsHeader parse_safetensors_header(std::span<const uint8_t> file, uint64_t file_size, const std::string& path) {
  if (file_size < 8 || file.size() < 8)
    fail(path, "file of " + std::to_string(file_size) + " bytes is shorter than the 8-byte header length");
  const uint64_t n = read_u64_le(file.data());
  if (n > kMaxHeader)
    fail(path, "header length " + std::to_string(n) +
                   " (the first 8 bytes, little-endian) exceeds the safetensors limit of " +
                   std::to_string(kMaxHeader) + " bytes (not a safetensors file?)");
  if (n > file_size - 8)
    fail(path, "header length " + std::to_string(n) + " exceeds the " + std::to_string(file_size - 8) +
                   " bytes after the length field (file truncated?)");
  if (n > file.size() - 8) fail(path, "header length " + std::to_string(n) + " exceeds the bytes given");
  const std::string_view text(reinterpret_cast<const char*>(file.data()) + 8, size_t(n));
  // nlohmann skips a byte order mark; the safetensors library does not (JSON text has none).
  if (text.starts_with("\xEF\xBB\xBF"))
    fail(path,
         "header starts with a UTF-8 byte order mark (bytes 8..10: EF BB BF), which safetensors does not "
         "allow");
  const json h = parse_json_strict(text, "safetensors: " + path + ": header", 8);
  if (!h.is_object()) fail(path, "header: expected a JSON object, got " + json_excerpt(h));
  const uint64_t data_start = 8 + n, data_size = file_size - data_start;
  SafetensorsHeader out;
  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (v.is_null()) continue;  // the library reads null as "no metadata"
      if (!v.is_object()) fail(path, "__metadata__: expected an object of strings, got " + json_excerpt(v));
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          fail(path, "__metadata__ entry " + quote(m.key()) + ": expected a string, got " +
                         json_excerpt(m.value()));
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor " + quote(name);
    if (!v.is_object())
      fail(path,
           where + ": expected an object {\"dtype\", \"shape\", \"data_offsets\"}, got " + json_excerpt(v));
    const json *dtype = field(v, "dtype"), *shape = field(v, "shape"), *off = field(v, "data_offsets");
    if (!dtype || !dtype->is_string())
      fail(path, where + ": 'dtype': expected a string such as \"BF16\", got " + got(dtype));
    if (!shape || !shape->is_array())
      fail(path, where + ": 'shape': expected an array of non-negative integers, got " + got(shape));
    if (!off || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned())
      fail(path,
           where + ": 'data_offsets': expected [begin, end], two non-negative integers, got " + got(off));
    TensorInfo t;
    t.name = name;
    t.dtype = parse_dtype(dtype->get<std::string>(), path, where);
    uint64_t count = 1, nonzero = 1;  // nonzero: product of the non-zero extents (bounds index math)
    for (const json& d : *shape) {
      if (!d.is_number_unsigned())
        fail(path,
             where + ": 'shape': expected an array of non-negative integers, got " + json_excerpt(*shape));
      const uint64_t s = d.get<uint64_t>();
      constexpr uint64_t kMax = uint64_t(std::numeric_limits<int64_t>::max());
      if (s > kMax || (s && nonzero > kMax / s))
        fail(path, where + ": shape " + json_excerpt(*shape) + " overflows");
      count *= s;
      if (s) nonzero *= s;
      t.shape.push_back(int64_t(s));
    }
    if (t.shape.size() > size_t(kMaxDims))
      fail(path, where + ": shape " + json_excerpt(*shape) + " has " + std::to_string(t.shape.size()) +
                     " dimensions; kimi supports at most " + std::to_string(kMaxDims));
    const uint64_t b = (*off)[0].get<uint64_t>(), e = (*off)[1].get<uint64_t>();
    const uint64_t es = uint64_t(dtype_size(t.dtype));
    if (count > std::numeric_limits<uint64_t>::max() / es) fail(path, where + ": byte size overflows");
    if (b > e)
      fail(path, where + ": data_offsets " + offsets_str(b, e) + ": begin " + std::to_string(b) + " > end " +
                     std::to_string(e));
    if (e > data_size)
      fail(path, where + ": data_offsets end " + std::to_string(e) + " beyond the data section of " +
                     std::to_string(data_size) + " bytes (file truncated?)");
    if (e - b != count * es)
      fail(path, where + ": expected " + std::to_string(count * es) + " bytes for shape " +
                     json_excerpt(*shape) + " and dtype " + dtype_tag(t.dtype) + ", data_offsets " +
                     offsets_str(b, e) + " span " + std::to_string(e - b));
    t.begin = data_start + b;
    t.nbytes = e - b;
    out.tensors.push_back(std::move(t));
  }
  // The library's layout rule: in (begin, end) order each tensor starts where the previous one ends, and the
  // last one ends at the end of the file (no holes, no overlaps, no trailing bytes; an empty tensor sits on
  // a boundary).
  std::sort(out.tensors.begin(), out.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.nbytes < b.nbytes;
  });
  uint64_t at = 0;
  const TensorInfo* prev = nullptr;
  auto offsets_of = [&](const TensorInfo& t) {
    return offsets_str(t.begin - data_start, t.begin - data_start + t.nbytes);
  };
  for (const TensorInfo& c : out.tensors) {
    const uint64_t b = c.begin - data_start;
    if (b < at)
      fail(path, "tensors " + quote(prev->name) + " (data_offsets " + offsets_of(*prev) + ") and " +
                     quote(c.name) + " (data_offsets " + offsets_of(c) + ") overlap");
    if (b > at)
      fail(path, "bytes [" + std::to_string(at) + ", " + std::to_string(b) +
                     ") of the data section belong to no tensor (between " +
                     (prev ? quote(prev->name) : std::string("the header")) + " and " + quote(c.name) +
                     "); safetensors requires the tensors to cover the data section without gaps");
    at = b + c.nbytes;
    prev = &c;
  }
  if (at != data_size)
    fail(path, "the tensors end at byte " + std::to_string(at) + " of the data section, which holds " +
                   std::to_string(data_size) + " bytes: the last " + std::to_string(data_size - at) +
                   " bytes belong to no tensor (safetensors requires the tensors to cover the data section "
                   "exactly)");
  std::sort(out.tensors.begin(), out.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
  return out;
}

std::map<std::string, std::string> parse_safetensors_index(std::string_view text, const std::string& path) {
  const std::string where = "safetensors index: " + path;
  const json j = parse_json_strict(text, where);
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    throw Error(where + ": expected an object with a 'weight_map' object (tensor name -> shard file), got " +
                json_excerpt(j));
  std::map<std::string, std::string> out;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    if (!it.value().is_string())
      throw Error(where + ": weight_map entry " + quote(it.key()) +
                  ": expected a shard file name string, got " + json_excerpt(it.value()));
    const std::string f = it.value().get<std::string>();
    const bool control = std::any_of(
        f.begin(), f.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
    if (f.empty() || f.find('/') != std::string::npos || f.find('\\') != std::string::npos || f == "." ||
        f == ".." || control)
      throw Error(where + ": weight_map entry " + quote(it.key()) + ": shard " + quote(f) +
                  " is not a plain file name in the checkpoint directory");
    out[it.key()] = f;
  }
  return out;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below); regular files ignore it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail(path, "cannot open: " + open_error_reason(path, errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const std::string why = S_ISDIR(st.st_mode) ? "is a directory, not a file" : "not a regular file";
    ::close(fd);
    fail(path, "cannot open: " + why);
  }
  size_ = size_t(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      fail(path, std::string("mmap failed: ") + std::strerror(err));
    }
    map_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  try {
    header_ = parse_safetensors_header(std::span<const uint8_t>(map_, size_), size_, path);
    place_data();
  } catch (...) {
    if (map_) ::munmap(const_cast<uint8_t*>(map_), size_);
    throw;
  }
}

void SafetensorsFile::place_data() {
  // The format does not align data: after a header whose length is not a multiple of 8, or with tensors of
  // mixed element sizes in any order, an element can start at an address its type may not be read from.
  // Such tensors are copied once into an 8-byte-aligned buffer; aligned ones stay views into the mapping.
  auto misaligned = [](const TensorInfo& t) {
    return t.nbytes != 0 && t.begin % uint64_t(dtype_size(t.dtype)) != 0;
  };
  uint64_t need = 0;
  for (const TensorInfo& t : header_.tensors)
    if (misaligned(t)) need += (t.nbytes + 7) / 8 * 8;
  if (need > 0) {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
    const uint64_t memory = pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
    if (memory != 0 && need > memory)
      fail(path_, std::to_string(need) +
                      " bytes of tensor data are not aligned to their elements and must be copied, "
                      "more than the " +
                      std::to_string(memory) +
                      " bytes of memory of this machine (rewrite the file with "
                      "the safetensors library, which pads the header to 8 bytes and orders tensors by "
                      "element size)");
    try {
      copies_ = std::make_unique_for_overwrite<uint64_t[]>(size_t(need / 8));
    } catch (const std::bad_alloc&) {
      fail(path_,
           "cannot allocate " + std::to_string(need) + " bytes for the copy of its misaligned tensors");
    }
  }
  data_.resize(header_.tensors.size());
  uint64_t used = 0;
  auto* copy = reinterpret_cast<uint8_t*>(copies_.get());
  for (size_t i = 0; i < header_.tensors.size(); ++i) {
    const TensorInfo& t = header_.tensors[i];
    if (!misaligned(t)) {
      data_[i] = map_ ? map_ + t.begin : nullptr;
      continue;
    }
    std::memcpy(copy + used, map_ + t.begin, size_t(t.nbytes));
    data_[i] = copy + used;
    used += (t.nbytes + 7) / 8 * 8;
  }
  copied_bytes_ = used;
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
  const TensorInfo* first = header_.tensors.data();
  const TensorInfo* own = &t >= first && &t < first + header_.tensors.size() ? &t : find(t.name);
  if (!own) fail(path_, "no tensor " + quote(t.name));
  // NOTE: the mapping is read-only; TensorView has no const flavour, so writes through it fault.
  return TensorView(const_cast<uint8_t*>(data_[size_t(own - first)]), own->dtype, own->shape);
}

Checkpoint::Checkpoint(const std::string& dir) : dir_(dir) {
  namespace fs = std::filesystem;
  require_directory(
      dir, "checkpoint ",
      "a checkpoint directory holding model.safetensors, or model.safetensors.index.json and its shards");
  const fs::path d(dir);
  const fs::path index = d / "model.safetensors.index.json", single = d / "model.safetensors";
  // symlink_status: a dangling link or a directory in the way is reported by the open below, with its reason.
  std::error_code ec;
  if (fs::exists(fs::symlink_status(index, ec))) {
    const auto map = parse_safetensors_index(
        read_text_file(index.string(), "safetensors index: ", kMaxIndexBytes), index.string());
    std::map<std::string, const SafetensorsFile*> opened;  // shard file name -> file
    for (const auto& [name, shard] : map) {
      if (!opened.count(shard)) {
        files_.push_back(std::make_unique<SafetensorsFile>((d / shard).string()));
        opened[shard] = files_.back().get();
      }
      const SafetensorsFile* f = opened[shard];
      const TensorInfo* t = f->find(name);
      if (!t)
        throw Error("checkpoint " + dir + ": model.safetensors.index.json maps tensor " + quote(name) +
                    " to shard " + quote(shard) + ", which does not contain it");
      index_[name] = {f, t};
    }
    // A tensor held by two shards is ambiguous: which copy is meant depends on who reads the files.
    std::map<std::string_view, std::string_view> holder;  // tensor name -> shard file name
    for (const auto& [shard, f] : opened) {
      for (const TensorInfo& t : f->header().tensors) {
        const auto [it, fresh] = holder.emplace(t.name, shard);
        if (fresh) continue;
        const auto m = map.find(t.name);
        throw Error("checkpoint " + dir + ": tensor " + quote(t.name) + " is in two shards, " +
                    quote(it->second) + " and " + quote(shard) +
                    " (model.safetensors.index.json maps it to " +
                    (m == map.end() ? std::string("neither") : quote(m->second)) +
                    "); each tensor must be stored once");
      }
    }
  } else if (fs::exists(fs::symlink_status(single, ec))) {
    files_.push_back(std::make_unique<SafetensorsFile>(single.string()));
    for (const TensorInfo& t : files_.back()->header().tensors) index_[t.name] = {files_.back().get(), &t};
  } else {
    throw Error("checkpoint " + dir + ": neither model.safetensors nor model.safetensors.index.json found");
  }
}

bool Checkpoint::has(std::string_view name) const { return index_.find(name) != index_.end(); }

const TensorInfo& Checkpoint::info(std::string_view name) const {
  auto it = index_.find(name);
  if (it == index_.end()) throw Error("checkpoint " + dir_ + ": missing tensor " + quote(name));
  return *it->second.second;
}

TensorView Checkpoint::get(std::string_view name) const {
  auto it = index_.find(name);
  if (it == index_.end()) throw Error("checkpoint " + dir_ + ": missing tensor " + quote(name));
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
  if (!out) throw Error("write_safetensors: " + path + ": cannot create: " + open_error_reason(path, errno));
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(text.size()) >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(text.data(), std::streamsize(text.size()));
  for (const TensorToWrite* t : order)
    out.write(static_cast<const char*>(t->data.data), std::streamsize(uint64_t(t->data.numel()) * t->data.element_size()));
  if (!out) throw Error("write_safetensors: write to " + path + " failed");
}

}  // namespace kimi::model
