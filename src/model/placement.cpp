// Implementation of kimi/model/placement.h.
#include "kimi/model/placement.h"

#include <algorithm>
#include <array>

namespace kimi::model {
namespace {

constexpr int kKinds = 7;

// The operators each block kind calls (src/model/*_block.cpp, forward.cpp): keep in step with that code. Which of
// them a device's backend implements is not listed here: the predicate asks the registry (kimi::op_supported).
constexpr std::string_view kEmbeddingOps[] = {"gather_rows"};
constexpr std::string_view kAttnResOps[] = {"attn_res"};
constexpr std::string_view kKdaOps[] = {"rms_norm",      "linear",         "short_conv_fwd",
                                        "kda_chunk_fwd", "gated_rms_norm", "kda_decode_step"};
constexpr std::string_view kMlaOps[] = {"rms_norm", "linear", "mla_cache_write", "mla_prefill", "mla_decode"};
constexpr std::string_view kDenseOps[] = {"rms_norm", "mlp"};
constexpr std::string_view kMoeOps[] = {"rms_norm", "latent_moe"};
constexpr std::string_view kHeadOps[] = {"gather_rows", "rms_norm", "linear"};

std::string_view plural(BlockKind k) {
  switch (k) {
    case BlockKind::embedding: return "embedding";
    case BlockKind::attn_res_mix: return "AttnRes mixes";
    case BlockKind::kda_mixer: return "KDA mixers";
    case BlockKind::mla_mixer: return "MLA mixers";
    case BlockKind::dense_ffn: return "dense FFNs";
    case BlockKind::moe_ffn: return "MoE FFNs";
    case BlockKind::head: return "head";
  }
  return "?";
}

// One of a kind per model: named without a count.
bool single(BlockKind k) { return k == BlockKind::embedding || k == BlockKind::head; }

}  // namespace

std::string_view block_name(BlockKind k) {
  switch (k) {
    case BlockKind::embedding: return "embedding";
    case BlockKind::attn_res_mix: return "AttnRes mix";
    case BlockKind::kda_mixer: return "KDA mixer";
    case BlockKind::mla_mixer: return "MLA mixer";
    case BlockKind::dense_ffn: return "dense FFN";
    case BlockKind::moe_ffn: return "MoE FFN";
    case BlockKind::head: return "head";
  }
  return "?";
}

std::span<const std::string_view> block_ops(BlockKind k) {
  switch (k) {
    case BlockKind::embedding: return kEmbeddingOps;
    case BlockKind::attn_res_mix: return kAttnResOps;
    case BlockKind::kda_mixer: return kKdaOps;
    case BlockKind::mla_mixer: return kMlaOps;
    case BlockKind::dense_ffn: return kDenseOps;
    case BlockKind::moe_ffn: return kMoeOps;
    case BlockKind::head: return kHeadOps;
  }
  return {};
}

Placement place_blocks(const Config& c, Device device, const BlockRule& where) {
  Placement p;
  p.device = device;
  auto add = [&](BlockKind k, int64_t layer) {
    const Device d = where(k, layer, p.blocks.size());
    p.blocks.push_back({k, layer, d});
    return d;
  };
  const bool attn_res = c.attn_res_block_size.has_value();
  p.embedding = add(BlockKind::embedding, -1);
  p.layers.resize(size_t(c.num_hidden_layers));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    Placement::Layer& L = p.layers[size_t(i)];
    if (attn_res) L.attn_mix = add(BlockKind::attn_res_mix, i);
    L.mixer = add(c.is_kda_layer(i) ? BlockKind::kda_mixer : BlockKind::mla_mixer, i);
    if (!attn_res) L.attn_mix = L.mixer;
    if (attn_res) L.ffn_mix = add(BlockKind::attn_res_mix, i);
    L.ffn = add(c.is_moe_layer(i) ? BlockKind::moe_ffn : BlockKind::dense_ffn, i);
    if (!attn_res) L.ffn_mix = L.ffn;
  }
  if (attn_res) p.output_mix = add(BlockKind::attn_res_mix, c.num_hidden_layers);
  p.head = add(BlockKind::head, c.num_hidden_layers);
  if (!attn_res) p.output_mix = p.head;
  return p;
}

Placement plan_placement(const Config& c, Device device, const OpSupported& supported) {
  // Per kind: the operators `device` lacks (empty: the kind runs there).
  std::array<std::vector<std::string_view>, kKinds> missing;
  for (int k = 0; k < kKinds; ++k)
    if (device.type != DeviceType::cpu)
      for (std::string_view op : block_ops(BlockKind(k)))
        if (!supported(op, device)) missing[size_t(k)].push_back(op);
  Placement p = place_blocks(c, device, [&](BlockKind k, int64_t, size_t) {
    return missing[size_t(k)].empty() ? device : Device::cpu();
  });

  for (int k = 0; k < kKinds; ++k) {
    const BlockKind kind = BlockKind(k);
    const int64_t n = p.count(kind, Device::cpu());
    if (missing[size_t(k)].empty() || n == 0) continue;  // the kind runs on `device`, or the model has none
    std::string ops;
    for (std::string_view op : missing[size_t(k)]) ops += (ops.empty() ? "" : ", ") + std::string(op);
    std::string what;
    if (single(kind)) {
      what = "the " + std::string(block_name(kind)) + " runs";
    } else if (kind == BlockKind::attn_res_mix) {
      what = "all " + std::to_string(n) + " AttnRes mixes run";
    } else {
      what = std::to_string(n) + " of " + std::to_string(c.num_hidden_layers) + " layers' " + std::string(plural(kind)) + " run";
    }
    p.notes.push_back(what + " on the CPU: no CUDA kernel for " + ops + "; " +
                      (single(kind) ? "its" : "their") + " inputs and outputs cross PCIe each step");
  }
  return p;
}

int64_t Placement::count(BlockKind k, Device d) const {
  int64_t n = 0;
  for (const Block& b : blocks) n += b.kind == k && b.device == d;
  return n;
}

std::string Placement::summary() const {
  // devices in first-use order, each with its kinds in model order
  std::vector<Device> devs;
  for (const Block& b : blocks)
    if (std::find(devs.begin(), devs.end(), b.device) == devs.end()) devs.push_back(b.device);
  std::string s;
  for (Device d : devs) {
    std::string kinds;
    for (int k = 0; k < kKinds; ++k) {
      const int64_t n = count(BlockKind(k), d);
      if (n == 0) continue;
      kinds += (kinds.empty() ? "" : ", ") +
               (single(BlockKind(k)) ? std::string(block_name(BlockKind(k)))
                                     : std::to_string(n) + " " + std::string(n == 1 ? block_name(BlockKind(k)) : plural(BlockKind(k))));
    }
    s += (s.empty() ? "" : "; ") + to_string(d) + ": " + kinds;
  }
  return s;
}

}  // namespace kimi::model
