// Implementation of kimi/model/cache.h.
#include "kimi/model/cache.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <string>

#include "kimi/device.h"
#include "kimi/error.h"
#include "kimi/model/model.h"

namespace kimi::model {

namespace {
// Per layer: kind (0 KDA, 1 MLA) and the sizes its cache tensors are built from.
std::vector<int64_t> signature(const Config& c) {
  std::vector<int64_t> s;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    if (c.is_kda_layer(i))
      s.insert(s.end(), {0, c.kda_num_heads, c.kda_head_dim, c.conv_kernel});
    else
      s.insert(s.end(), {1, c.kv_lora_rank, c.qk_rope_head_dim, 0});
  }
  return s;
}

size_t mul_sat(size_t a, size_t b) {
  size_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<size_t>::max() : r;
}
size_t add_sat(size_t a, size_t b) {
  size_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<size_t>::max() : r;
}

// Bytes of the pools of layer i for S slots of L tokens (saturating: a huge request stays huge).
size_t layer_bytes(const Config& c, int64_t i, int64_t S, int64_t L) {
  if (c.is_kda_layer(i)) {
    const size_t P = size_t(c.kda_num_heads * c.kda_head_dim);
    return mul_sat(mul_sat(size_t(S), add_sat(mul_sat(P, size_t(c.kda_head_dim)), mul_sat(3 * P, size_t(c.conv_kernel - 1)))), 4);
  }
  return mul_sat(mul_sat(mul_sat(size_t(S), size_t(L)), size_t(c.kv_lora_rank + c.qk_rope_head_dim)), 4);
}

std::string bytes_str(size_t b) {
  char gib[32];
  std::snprintf(gib, sizeof gib, "%.2f", double(b) / double(size_t(1) << 30));
  return std::to_string(b) + " bytes (" + gib + " GiB)";
}

std::string shape_str(int64_t S, int64_t L) {
  return std::to_string(S) + (S == 1 ? " sequence" : " sequences") + " x " + std::to_string(L) + " tokens";
}

// Throws unless `new_host` more bytes of host memory are available. `total` is the whole cache.
void check_host_memory(const std::string& what, size_t total, size_t new_host) {
  if (new_host == 0) return;
  const size_t avail = device_available_bytes(Device::cpu());  // MemAvailable (kimi/device.h)
  if (new_host > avail)
    throw Error(what + " needs " + bytes_str(total) +
                (total == new_host ? " of host memory; " : ", " + bytes_str(new_host) + " of it new host memory; ") +
                bytes_str(avail) + " available");
}

// Allocates one pool, turning an allocation failure into a kimi::Error that says what was asked.
Tensor alloc_pool(std::initializer_list<int64_t> shape, Device d, const std::string& what) {
  try {
    return Tensor(DType::f32, shape, d);
  } catch (const std::bad_alloc&) {
    size_t n = 4;
    for (int64_t e : shape) n = mul_sat(n, size_t(e));
    throw Error(what + ": a pool of " + bytes_str(n) + " on " + to_string(d) + " could not be allocated");
  } catch (const Error& e) {
    throw Error(what + ": a pool on " + to_string(d) + " could not be allocated: " + e.what());
  }
}
}  // namespace

Cache::Cache(const Config& c, int64_t max_seqs, int64_t max_len)
    : Cache(c, max_seqs, max_len, std::vector<Device>(size_t(std::max<int64_t>(c.num_hidden_layers, 0)), Device::cpu())) {}

Cache::Cache(const Model& m, int64_t max_seqs, int64_t max_len) : Cache(m.config(), max_seqs, max_len, [&] {
  std::vector<Device> d;
  for (const Placement::Layer& L : m.placement().layers) d.push_back(L.mixer);
  return d;
}()) {}

Cache::Cache(const Config& c, int64_t max_seqs, int64_t max_len, const std::vector<Device>& layer_devices)
    : max_len_(max_len), signature_(signature(c)), devices_(layer_devices) {
  if (max_seqs < 1) throw Error("Cache: max_seqs: expected >= 1, got " + std::to_string(max_seqs));
  if (max_len < 1) throw Error("Cache: max_len: expected >= 1, got " + std::to_string(max_len));
  if (int64_t(layer_devices.size()) != c.num_hidden_layers)
    throw Error("Cache: layer_devices: expected " + std::to_string(c.num_hidden_layers) + " devices (one per layer), got " +
                std::to_string(layer_devices.size()));
  const int64_t S = max_seqs;
  const std::string what = "Cache: " + shape_str(S, max_len);
  size_t host = 0;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    if (devices_[size_t(i)] == Device::cpu()) host = add_sat(host, layer_bytes(c, i, S, max_len));
  check_host_memory(what, bytes_for(c, S, max_len), host);
  length_.assign(size_t(max_seqs), 0);
  layers_.resize(size_t(c.num_hidden_layers));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    Layer& L = layers_[size_t(i)];
    const Device d = devices_[size_t(i)];
    if (c.is_kda_layer(i)) {
      const int64_t H = c.kda_num_heads, K = c.kda_head_dim, P = H * K, W1 = c.conv_kernel - 1;
      L.state = alloc_pool({S, H, K, K}, d, what);
      L.conv_q = alloc_pool({S, P, W1}, d, what);
      L.conv_k = alloc_pool({S, P, W1}, d, what);
      L.conv_v = alloc_pool({S, P, W1}, d, what);
    } else {
      L.latent = alloc_pool({S, max_len, c.kv_lora_rank + c.qk_rope_head_dim}, d, what);
    }
  }
}

size_t Cache::bytes_for(const Config& c, int64_t max_seqs, int64_t max_len) {
  size_t b = 0;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) b = add_sat(b, layer_bytes(c, i, max_seqs, max_len));
  return b;
}

void Cache::reserve(int64_t max_len) {
  if (max_len <= max_len_) return;
  const int64_t S = max_seqs();
  const std::string what = "Cache: growing to " + shape_str(S, max_len);
  // The new latent pools first (an allocation that fails leaves the cache as it was), then every slot's rows.
  size_t host = 0, total = 0;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Tensor& old = layers_[i].latent;
    if (!old.data()) continue;
    const size_t b = mul_sat(mul_sat(mul_sat(size_t(S), size_t(max_len)), size_t(old.view().size(2))), 4);
    if (devices_[i] == Device::cpu()) host = add_sat(host, b);
    total = add_sat(total, b - old.nbytes());
  }
  check_host_memory(what, add_sat(bytes(), total), host);
  std::vector<Tensor> grown(layers_.size());
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Tensor& old = layers_[i].latent;
    if (!old.data()) continue;
    const int64_t D = old.view().size(2);
    grown[i] = alloc_pool({S, max_len, D}, devices_[i], what);
    for (int64_t s = 0; s < S; ++s) {
      const int64_t n = length_[size_t(s)];
      if (n == 0) continue;
      float* dst = grown[i].data_as<float>() + s * max_len * D;
      float* src = old.data_as<float>() + s * max_len_ * D;
      copy(TensorView(dst, DType::f32, {n, D}, devices_[i]), TensorView(src, DType::f32, {n, D}, devices_[i]));
    }
  }
  for (size_t i = 0; i < layers_.size(); ++i)
    if (grown[i].data()) layers_[i].latent = std::move(grown[i]);
  max_len_ = max_len;
}

void Cache::check_devices(const Placement& p) const {
  for (size_t i = 0; i < devices_.size() && i < p.layers.size(); ++i)
    if (devices_[i] != p.layers[i].mixer)
      throw Error("forward: argument 'cache': expected layer " + std::to_string(i) + "'s pools on " +
                  to_string(p.layers[i].mixer) + " (where its mixer runs: build the cache with Cache(model, ...)), got " +
                  to_string(devices_[i]));
}

Device Cache::device(int64_t layer) const {
  (void)this->layer(layer);  // bounds check
  return devices_[size_t(layer)];
}

void Cache::check_matches(const Config& c) const {
  if (signature(c) != signature_)
    throw Error("forward: argument 'cache': expected a Cache built for this model's config (" +
                std::to_string(c.num_hidden_layers) + " layers, the same layer kinds and sizes), got one built for " +
                std::to_string(layers_.size()) + " layers" +
                (layers_.size() == size_t(c.num_hidden_layers) ? " of other kinds or sizes" : ""));
}

Cache::Layer& Cache::layer(int64_t i) {
  if (i < 0 || i >= int64_t(layers_.size()))
    throw Error("Cache: layer: expected a value in [0, " + std::to_string(layers_.size()) + "), got " + std::to_string(i));
  return layers_[size_t(i)];
}

const Cache::Layer& Cache::layer(int64_t i) const { return const_cast<Cache*>(this)->layer(i); }

void Cache::check_slot(int64_t slot) const {
  if (slot < 0 || slot >= max_seqs())
    throw Error("Cache: slot: expected a value in [0, " + std::to_string(max_seqs()) + "), got " + std::to_string(slot));
}

int64_t Cache::length(int64_t slot) const {
  check_slot(slot);
  return length_[size_t(slot)];
}

void Cache::reset(int64_t slot) {
  check_slot(slot);
  length_[size_t(slot)] = 0;
  // The MLA latent rows past length() are never read: only the recurrent state must be cleared.
  for (Layer& L : layers_) {
    for (Tensor* t : {&L.state, &L.conv_q, &L.conv_k, &L.conv_v}) {
      if (!t->data()) continue;
      const size_t row = t->nbytes() / size_t(max_seqs());
      device_zero(t->device(), static_cast<char*>(t->data()) + size_t(slot) * row, row);
    }
  }
}

namespace {
// Slot `slot` of a pool [S, ...] as a view of its first `rows` rows along dim 1 (all of them when rows < 0).
TensorView slot_rows(const Tensor& pool, int64_t slot, int64_t rows = -1) {
  TensorView v = pool.view().slice(0, slot, slot + 1);
  if (rows >= 0) v = v.slice(1, 0, rows);
  return v;
}
}  // namespace

Cache::Snapshot Cache::snapshot(int64_t slot, const Context& ctx) const {
  check_slot(slot);
  Snapshot s;
  s.length_ = length_[size_t(slot)];
  s.signature_ = signature_;
  s.layers_.resize(layers_.size());
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& L = layers_[i];
    Layer& out = s.layers_[i];
    auto take = [&](const Tensor& pool, Tensor& dst, int64_t rows) {
      if (!pool.data() || rows == 0) return;  // not this layer's kind, or no latent rows yet
      const TensorView src = slot_rows(pool, slot, rows);  // [1, ...]: the slot's part of the pool
      dst = Tensor::uninitialized(DType::f32, std::span<const int64_t>(src.shape.data(), size_t(src.ndim)), devices_[i]);
      copy(dst.view(), src, ctx);
    };
    take(L.state, out.state, -1), take(L.conv_q, out.conv_q, -1), take(L.conv_k, out.conv_k, -1);
    take(L.conv_v, out.conv_v, -1), take(L.latent, out.latent, s.length_);
  }
  return s;
}

void Cache::restore(int64_t slot, const Snapshot& s, const Context& ctx) {
  check_slot(slot);
  if (s.signature_ != signature_)
    throw Error("Cache: restore: argument 'snapshot': expected a snapshot of a cache with this cache's " +
                std::to_string(layers_.size()) + " layers of the same kinds and sizes, got one of " +
                std::to_string(s.layers_.size()) + " layers" +
                (s.layers_.size() == layers_.size() ? " of other kinds or sizes" : ""));
  if (s.length_ > max_len_)
    throw Error("Cache: restore: argument 'snapshot': expected a length <= max_len " + std::to_string(max_len_) +
                ", got " + std::to_string(s.length_));
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& src = s.layers_[i];
    Layer& L = layers_[i];
    for (auto [pool, from] : {std::pair{&L.state, &src.state}, {&L.conv_q, &src.conv_q}, {&L.conv_k, &src.conv_k},
                              {&L.conv_v, &src.conv_v}})
      if (pool->data()) copy(slot_rows(*pool, slot), from->view(), ctx);
    if (L.latent.data() && s.length_ > 0) copy(slot_rows(L.latent, slot, s.length_), src.latent.view(), ctx);
  }
  length_[size_t(slot)] = s.length_;
}

size_t Cache::Snapshot::bytes() const {
  size_t b = 0;
  for (const Layer& L : layers_)
    for (const Tensor* t : {&L.state, &L.conv_q, &L.conv_k, &L.conv_v, &L.latent}) b += t->data() ? t->nbytes() : 0;
  return b;
}

void Cache::advance(int64_t slot, int64_t tokens) {
  check_slot(slot);
  if (tokens < 0 || length_[size_t(slot)] + tokens > max_len_)
    throw Error("Cache: advance: slot " + std::to_string(slot) + " would hold " +
                std::to_string(length_[size_t(slot)] + tokens) + " tokens, expected <= max_len " +
                std::to_string(max_len_));
  length_[size_t(slot)] += tokens;
}

size_t Cache::bytes() const {
  size_t b = 0;
  for (const Layer& L : layers_)
    for (const Tensor* t : {&L.state, &L.conv_q, &L.conv_k, &L.conv_v, &L.latent}) b += t->data() ? t->nbytes() : 0;
  return b;
}

}  // namespace kimi::model
