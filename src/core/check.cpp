// Implementation of src/core/check.h.
#include "core/check.h"

namespace kimi::check {

std::string shape_string(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + (s[i] == kAny ? std::string("?") : std::to_string(s[i]));
  return r + "]";
}

int64_t load_index(const TensorView& t, int64_t i) {
  const char* p = static_cast<const char*>(t.data) + i * t.strides[0] * int64_t(t.element_size());
  return t.dtype == DType::i64 ? *reinterpret_cast<const int64_t*>(p) : *reinterpret_cast<const int32_t*>(p);
}

void Checker::fail(std::string_view arg, const std::string& expected, const std::string& got) const {
  throw Error(op_ + ": argument '" + std::string(arg) + "': expected " + expected + ", got " + got);
}

void Checker::fail(const std::string& message) const { throw Error(op_ + ": " + message); }

void Checker::present(std::string_view arg, const TensorView& t) const {
  if (!t.present()) fail(arg, "a tensor", "none (null data)");
  if (t.ndim < 0 || t.ndim > kMaxDims) fail(arg, "0 to 6 dimensions", std::to_string(t.ndim));
  for (int d = 0; d < t.ndim; ++d)
    if (t.shape[d] < 0) fail(arg, "non-negative sizes", "shape " + t.shape_string());
}

namespace {
// [first byte, one past the last byte] of a view with non-negative strides; {0, 0} when empty.
std::pair<uintptr_t, uintptr_t> byte_span(const TensorView& t) {
  if (!t.present() || t.numel() == 0) return {0, 0};
  int64_t last = 0;
  for (int d = 0; d < t.ndim; ++d) last += (t.shape[d] - 1) * t.strides[d];
  const uintptr_t b = reinterpret_cast<uintptr_t>(t.data);
  return {b, b + uintptr_t(last + 1) * t.element_size()};
}
}  // namespace

bool Checker::overlaps(const TensorView& a, const TensorView& b) {
  const auto [a0, a1] = byte_span(a);
  const auto [b0, b1] = byte_span(b);
  return a0 != a1 && b0 != b1 && a0 < b1 && b0 < a1;
}

void Checker::same_or_disjoint(std::string_view arg, const TensorView& t, std::string_view other_arg,
                               const TensorView& other) const {
  if (!overlaps(t, other)) return;
  bool same = t.data == other.data && t.dtype == other.dtype && t.ndim == other.ndim;
  for (int d = 0; same && d < t.ndim; ++d) same = t.shape[d] == other.shape[d] && t.strides[d] == other.strides[d];
  if (!same)
    fail(arg, "either exactly the view '" + std::string(other_arg) + "' (in place) or memory disjoint from it",
         "a different view of overlapping memory (" + std::string(dtype_name(t.dtype)) + " " + t.shape_string() +
             " vs " + std::string(dtype_name(other.dtype)) + " " + other.shape_string() + ")");
}

void Checker::disjoint(std::string_view arg, const TensorView& t, std::string_view other_arg,
                       const TensorView& other) const {
  if (overlaps(t, other))
    fail(arg, "memory disjoint from '" + std::string(other_arg) + "' (the operator is not in place)",
         "a view overlapping it");
}

void Checker::rank(std::string_view arg, const TensorView& t, int ndim) const {
  present(arg, t);
  if (t.ndim != ndim)
    fail(arg, std::to_string(ndim) + " dimensions", std::to_string(t.ndim) + " (shape " + t.shape_string() + ")");
}

void Checker::shape(std::string_view arg, const TensorView& t, const std::vector<int64_t>& expected) const {
  present(arg, t);
  bool ok = t.ndim == int(expected.size());
  for (int d = 0; ok && d < t.ndim; ++d) ok = expected[d] == kAny || expected[d] == t.shape[d];
  if (!ok) fail(arg, "shape " + shape_string(expected), t.shape_string());
}

void Checker::shape(std::string_view arg, const TensorView& t, std::initializer_list<int64_t> expected) const {
  shape(arg, t, std::vector<int64_t>(expected));
}

void Checker::dtype(std::string_view arg, const TensorView& t, std::initializer_list<DType> allowed) const {
  present(arg, t);
  std::string names;
  for (DType d : allowed) {
    if (d == t.dtype) return;
    names += (names.empty() ? "" : "/") + std::string(dtype_name(d));
  }
  fail(arg, "dtype " + names, std::string(dtype_name(t.dtype)));
}

void Checker::device(std::string_view arg, const TensorView& t, Device d) const {
  if (!(t.device == d)) fail(arg, "device " + to_string(d), to_string(t.device));
}

void Checker::no_negative_strides(std::string_view arg, const TensorView& t) const {
  for (int d = 0; d < t.ndim; ++d)
    if (t.strides[d] < 0) fail(arg, "non-negative strides", "stride " + std::to_string(t.strides[d]) + " in dim " + std::to_string(d));
}

void Checker::inner_contiguous(std::string_view arg, const TensorView& t) const {
  no_negative_strides(arg, t);
  if (t.ndim > 0 && t.shape[t.ndim - 1] > 1 && t.strides[t.ndim - 1] != 1)
    fail(arg, "stride 1 in the last dimension", "stride " + std::to_string(t.strides[t.ndim - 1]));
}

void Checker::contiguous(std::string_view arg, const TensorView& t) const {
  if (!t.is_contiguous()) {
    std::string s = "[";
    for (int d = 0; d < t.ndim; ++d) s += (d ? ", " : "") + std::to_string(t.strides[d]);
    fail(arg, "contiguous strides", s + "]");
  }
}

Device Checker::same_device(std::initializer_list<std::pair<std::string_view, const TensorView*>> ts) const {
  const TensorView* first = nullptr;
  std::string_view first_name;
  for (auto& [name, t] : ts) {
    if (!t->present()) continue;
    if (!first) {
      first = t;
      first_name = name;
    } else if (!(t->device == first->device)) {
      fail(name, "device " + to_string(first->device) + " (like '" + std::string(first_name) + "')", to_string(t->device));
    }
  }
  return first ? first->device : Device::cpu();
}

std::vector<int64_t> Checker::cu_seqlens(std::string_view arg, const TensorView& t, int64_t total) const {
  rank(arg, t, 1);
  dtype(arg, t, {DType::i32, DType::i64});
  if (t.shape[0] < 2) fail(arg, "at least 2 offsets (N+1 with N >= 1)", std::to_string(t.shape[0]));
  if (t.device.type != DeviceType::cpu)
    fail(arg, "cu_seqlens readable on the host (device cpu)", to_string(t.device));
  std::vector<int64_t> off(static_cast<size_t>(t.shape[0]));
  for (int64_t i = 0; i < t.shape[0]; ++i) off[size_t(i)] = load_index(t, i);
  if (off.front() != 0) fail(arg, "first offset 0", std::to_string(off.front()));
  for (size_t i = 1; i < off.size(); ++i)
    if (off[i] < off[i - 1])
      fail(arg, "non-decreasing offsets", "offset[" + std::to_string(i) + "] = " + std::to_string(off[i]) +
                                               " < offset[" + std::to_string(i - 1) + "] = " + std::to_string(off[i - 1]));
  if (off.back() != total) fail(arg, "last offset = total tokens " + std::to_string(total), std::to_string(off.back()));
  return off;
}

std::vector<int64_t> Checker::host_index(std::string_view arg, const TensorView& t, int64_t n) const {
  rank(arg, t, 1);
  dtype(arg, t, {DType::i32, DType::i64});
  shape(arg, t, {n});
  if (t.device.type != DeviceType::cpu) fail(arg, "an index tensor readable on the host (device cpu)", to_string(t.device));
  no_negative_strides(arg, t);
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = load_index(t, i);
  return v;
}

bool Checker::device_index(std::string_view arg, const TensorView& t, int64_t n, Device dev) const {
  if (!t.present() || t.device.type == DeviceType::cpu) return false;
  rank(arg, t, 1);
  dtype(arg, t, {DType::i32, DType::i64});
  shape(arg, t, {n});
  no_negative_strides(arg, t);
  if (t.device != dev)
    fail(arg, dev.type == DeviceType::cpu ? std::string("an index tensor readable on the host (device cpu, like the tensors)")
                                          : "device cpu (host values) or " + to_string(dev) + " (the tensors' device)",
         to_string(t.device));
  return true;
}

std::vector<int64_t> Checker::slots(std::string_view arg, const TensorView& t, int64_t n, std::string_view pool_arg,
                                    int64_t pool, bool distinct) const {
  std::vector<int64_t> s;
  if (!t.present()) {
    if (n > pool)
      fail(pool_arg, "at least N = " + std::to_string(n) + " rows in dimension 0 (no '" + std::string(arg) + "' given)",
           "shape[0] = " + std::to_string(pool));
    for (int64_t i = 0; i < n; ++i) s.push_back(i);
    return s;
  }
  s = host_index(arg, t, n);
  std::vector<int64_t> owner(distinct ? static_cast<size_t>(pool) : 0, -1);
  const std::string a(arg);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = s[size_t(i)];
    if (v < 0 || v >= pool)
      fail(arg, "values in [0, " + std::to_string(pool) + ") (rows of '" + std::string(pool_arg) + "')",
           a + "[" + std::to_string(i) + "] = " + std::to_string(v));
    if (!distinct) continue;
    if (owner[size_t(v)] >= 0)
      fail(arg, "distinct rows (each row of '" + std::string(pool_arg) + "' written once)",
           a + "[" + std::to_string(owner[size_t(v)]) + "] = " + a + "[" + std::to_string(i) + "] = " + std::to_string(v));
    owner[size_t(v)] = i;
  }
  return s;
}

void Checker::range(std::string_view arg, int64_t value, int64_t lo, int64_t hi) const {
  if (value < lo || value > hi)
    fail(arg, "a value in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]", std::to_string(value));
}

}  // namespace kimi::check
