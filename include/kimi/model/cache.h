// kimi/model/cache.h: the per-sequence decode state of every layer, held in slots.
//
// A Cache is a pool of `max_seqs` sequence slots, each able to hold up to `max_len` tokens. Per layer:
//   KDA layer: state   f32 [S, H, K, V]          (kv layout, SPEC 5; zero for an empty slot)
//              conv_q, conv_k, conv_v f32 [S, P, W-1]   the last W-1 conv INPUTS per channel, oldest first
//                                                 (kimi/ops/conv.h's cache layout; P = H*K)
//   MLA layer: latent  f32 [S, max_len, R + Pr]  token j of slot s at [s, j, :] = [RMSNorm(c_j) | k_pe_j]
//                                                 (R = kv_lora_rank, Pr = qk_rope_head_dim; SPEC 6)
// S = max_seqs. length(s) counts the tokens slot s has consumed; forward() appends at that position.
// Everything is fp32. A layer's pools live on the device its mixer runs on: Cache(model, ...) follows the
// model's placement (kimi/model/placement.h); Cache(config, ...) puts every pool on the host (a CPU model).
// Only the MLA latent pools grow with max_len; reserve() grows them in place of a cache sized for the worst
// case up front (generate() starts small and doubles). Host pools are checked against the host's available
// memory (MemAvailable) before they are allocated: the pools are zero-filled, so an allocation the kernel
// over-commits would be touched at once, and a cache larger than memory must be an error, not an OOM kill.
//
// Snapshots (prefix caching, docs/serve.md): snapshot(slot) copies everything a slot's future depends on at its
// current length n into memory the Snapshot owns, on the pools' devices: per KDA layer its state [H, K, V] and conv
// caches [P, W-1] (the recurrence's whole past: unlike attention, a KDA layer cannot rebuild its state from per-token
// rows), per MLA layer the latent rows [0, n) as [n, R + Pr]. restore(slot, s) writes them back and sets the
// slot's length to n, so the slot continues exactly as the snapshotted one did.
#pragma once

#include <cstdint>
#include <vector>

#include "kimi/context.h"
#include "kimi/model/config.h"
#include "kimi/model/placement.h"
#include "kimi/tensor.h"

namespace kimi::model {

class Model;
struct Batch;
struct ForwardOptions;

class Cache {
 public:
  struct Layer {
    Tensor state, conv_q, conv_k, conv_v;  // KDA layers
    Tensor latent;                         // MLA layers
  };

  // One slot's contents at one length: per layer the slot's part of each pool, shaped [1, ...] (latent: rows
  // [0, length) only, [1, length, R + Pr]; absent when length is 0).
  class Snapshot {
   public:
    int64_t length() const { return length_; }
    size_t bytes() const;  // memory held (all devices)

   private:
    friend class Cache;
    int64_t length_ = 0;
    std::vector<Layer> layers_;
    std::vector<int64_t> signature_;  // the snapshotted cache's (restore checks it)
  };

  // Throws kimi::Error when max_seqs < 1 or max_len < 1, or when the pools do not fit in memory (the message
  // gives the bytes needed and available). Every pool on the host.
  Cache(const Config& c, int64_t max_seqs, int64_t max_len);
  // Pools of layer i on layer_devices[i] (num_hidden_layers entries).
  Cache(const Config& c, int64_t max_seqs, int64_t max_len, const std::vector<Device>& layer_devices);
  // Pools where the model's mixers run.
  Cache(const Model& m, int64_t max_seqs, int64_t max_len);

  int64_t max_seqs() const { return int64_t(length_.size()); }
  int64_t max_len() const { return max_len_; }
  int64_t length(int64_t slot) const;  // tokens held by slot (throws on a bad slot)
  void reset(int64_t slot);            // empty the slot: length 0, zero state and conv caches
  // A copy of slot's pools at its current length (throws on a bad slot). The copies run on ctx's stream.
  Snapshot snapshot(int64_t slot, const Context& ctx = {}) const;
  // Overwrites slot's pools with s and sets its length to s.length(). Throws kimi::Error, the cache unchanged, on
  // a bad slot, a snapshot of a cache with other layer kinds or sizes, or one longer than max_len().
  void restore(int64_t slot, const Snapshot& s, const Context& ctx = {});
  size_t bytes() const;                // memory held (all devices)
  Device device(int64_t layer) const;  // where layer's pools live

  // Bytes the pools of a cache of this shape hold (all devices): what the constructor allocates.
  static size_t bytes_for(const Config& c, int64_t max_seqs, int64_t max_len);
  // Grows every MLA latent pool to max_len tokens per slot, keeping each slot's rows; nothing when
  // max_len <= max_len(). Throws kimi::Error, the cache unchanged, when the new pools do not fit (old and
  // new pools coexist while the rows are copied: the message gives the bytes needed and available).
  void reserve(int64_t max_len);

  // Throws kimi::Error unless this cache was built for a config with the same layer kinds and sizes.
  void check_matches(const Config& c) const;
  // Throws kimi::Error unless every layer's pools are on the device its mixer runs on in p.
  void check_devices(const Placement& p) const;

  Layer& layer(int64_t i);             // bounds-checked
  const Layer& layer(int64_t i) const;

 private:
  friend Tensor forward(const Model&, Cache&, const Batch&, const ForwardOptions&, const Context&);
  friend void forward_into(const Model&, Cache&, const Batch&, TensorView, const ForwardOptions&, const Context&);
  void advance(int64_t slot, int64_t tokens);  // forward() after a step
  void check_slot(int64_t slot) const;
  int64_t max_len_;
  std::vector<int64_t> length_;
  std::vector<Layer> layers_;
  std::vector<int64_t> signature_;  // per layer: kind, then its sizes (check_matches)
  std::vector<Device> devices_;     // per layer: where its pools live
};

}  // namespace kimi::model
