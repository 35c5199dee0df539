// Implementation of kimi/model/cache.h.
#include "kimi/model/cache.h"

#include <algorithm>
#include <cstring>
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
  length_.assign(size_t(max_seqs), 0);
  layers_.resize(size_t(c.num_hidden_layers));
  const int64_t S = max_seqs;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    Layer& L = layers_[size_t(i)];
    const Device d = devices_[size_t(i)];
    if (c.is_kda_layer(i)) {
      const int64_t H = c.kda_num_heads, K = c.kda_head_dim, P = H * K, W1 = c.conv_kernel - 1;
      L.state = Tensor(DType::f32, {S, H, K, K}, d);
      L.conv_q = Tensor(DType::f32, {S, P, W1}, d);
      L.conv_k = Tensor(DType::f32, {S, P, W1}, d);
      L.conv_v = Tensor(DType::f32, {S, P, W1}, d);
    } else {
      L.latent = Tensor(DType::f32, {S, max_len, c.kv_lora_rank + c.qk_rope_head_dim}, d);
    }
  }
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
