// kimi/model/placement.h: which device runs each block of a model (the CUDA backend, op by op).
//
// A model is a sequence of blocks, in this order:
//   embedding                                  gather_rows of the token rows
//   per layer i:
//     AttnRes mix before the mixer             (Block AttnRes only) attn_res over the sealed blocks + partial
//     mixer: KDA or MLA                        its input RMSNorm, projections, attention / recurrence, W_o
//     AttnRes mix before the FFN               (Block AttnRes only)
//     FFN: dense or MoE                        its post-attention RMSNorm, the MLP / (latent) MoE
//   AttnRes output mix                         (Block AttnRes only)
//   head                                       last-row selection (gather_rows), final RMSNorm, lm_head
// Each block kind calls a fixed list of operators (block_ops). The rule: on a CUDA device, a block runs there
// iff every operator its kind calls has a CUDA kernel; otherwise it runs on the CPU. The plan then carries
// one note per block kind with blocks on the CPU, naming the missing kernels (Model prints them once through
// kimi/log.h). A block's weights and cache pools live on its device; activations ([T, d] f32) cross devices
// only between blocks. plan_placement is a pure function of (config, device, predicate): tests give it fake
// predicates.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kimi/model/config.h"
#include "kimi/tensor.h"

namespace kimi::model {

enum class BlockKind : uint8_t { embedding, attn_res_mix, kda_mixer, mla_mixer, dense_ffn, moe_ffn, head };

std::string_view block_name(BlockKind k);           // "KDA mixer", "AttnRes mix", "embedding", ...
std::span<const std::string_view> block_ops(BlockKind k);  // the operators (kimi/ops names) the kind calls

// Whether an operator has an implementation on a device: kimi::op_supported (kimi/device.h), or a fake.
using OpSupported = std::function<bool(std::string_view op, Device d)>;

struct Placement {
  struct Block {
    BlockKind kind;
    int64_t layer;  // the decoder layer; -1 for the embedding, num_hidden_layers for the output mix and head
    Device device;
  };
  struct Layer {
    Device attn_mix, mixer, ffn_mix, ffn;  // the mixes only with Block AttnRes (else they equal mixer / ffn)
  };

  Device device;                      // the device asked for
  std::vector<Block> blocks;          // every block in model order
  Device embedding, output_mix, head;  // output_mix: Block AttnRes only (else equals head)
  std::vector<Layer> layers;          // [num_hidden_layers]
  std::vector<std::string> notes;     // one per block kind with blocks on the CPU although `device` is a GPU

  // "cuda:0: embedding, 6 KDA mixers, ...; cpu: 2 MLA mixers, head" (kinds in model order, per device).
  std::string summary() const;
  int64_t count(BlockKind k, Device d) const;  // blocks of kind k placed on d
};

// The plan for running config c on `device` when `supported` says which operators each backend has.
// device cpu: every block on the CPU, no notes.
Placement plan_placement(const Config& c, Device device, const OpSupported& supported);

// Any placement: block number `ordinal` (model order) of kind k in `layer` runs on where(k, layer, ordinal);
// `device` is recorded as the one asked for; no notes. plan_placement is place_blocks with its rule. Tests use
// it to put blocks on a second host "device" (Device{cpu, 1}: host memory, the CPU backend) and so run the
// cross-device path of the runtime without a GPU.
using BlockRule = std::function<Device(BlockKind k, int64_t layer, size_t ordinal)>;
Placement place_blocks(const Config& c, Device device, const BlockRule& where);

}  // namespace kimi::model
